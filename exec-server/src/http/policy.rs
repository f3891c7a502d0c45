//! Destination policy: the operator's URL rules and the SSRF guard.
//!
//! The guard is a reqwest DNS resolver ([`GuardedResolver`]): it resolves the host once, classifies
//! every address, refuses the whole host if any address is in a denied class, and hands reqwest exactly
//! the vetted addresses to dial. There is no second lookup between check and connect, so a DNS answer
//! that changes (rebinding) cannot slip a denied address in. URLs with a literal IP never reach a
//! resolver, so [`check_url`] classifies those itself.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use super::config::{AddressPolicy, HttpOptions};
use super::error::Denied;

/// What kind of address an IP is, for the SSRF guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// Routable public address.
    Public,
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// RFC 1918, fc00::/7, 100.64.0.0/10.
    Private,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// Cloud metadata services.
    Metadata,
    /// Unspecified, broadcast, multicast, documentation and other never-dialable ranges.
    Reserved,
}

/// Classifies one address (IPv4-mapped IPv6 addresses are classified as their IPv4 address).
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let o = ip.octets();
    if o == [169, 254, 169, 254] || o == [100, 100, 100, 200] || o == [169, 254, 170, 2] {
        AddressClass::Metadata
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_link_local() {
        AddressClass::LinkLocal
    } else if ip.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64) {
        AddressClass::Private
    } else if ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || o[0] == 0
        || o[0] >= 240
    {
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    let s = ip.segments();
    if s == [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254] {
        AddressClass::Metadata
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if (s[0] & 0xffc0) == 0xfe80 {
        AddressClass::LinkLocal
    } else if (s[0] & 0xfe00) == 0xfc00 {
        AddressClass::Private
    } else if ip.is_unspecified() || ip.is_multicast() || s[0] == 0x2001 && s[1] == 0x0db8 {
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

/// The rule that denies `class`, or `None` when the policy admits it.
fn address_rule(policy: &AddressPolicy, class: AddressClass) -> Option<&'static str> {
    match class {
        AddressClass::Public => None,
        AddressClass::Loopback => (!policy.loopback).then_some("allow_loopback = false"),
        AddressClass::Private => (!policy.private).then_some("allow_private = false"),
        AddressClass::LinkLocal => {
            (!policy.link_local).then_some("link-local addresses (allow_link_local = false)")
        }
        AddressClass::Metadata => {
            (!policy.metadata).then_some("cloud metadata addresses (allow_metadata = false)")
        }
        AddressClass::Reserved => Some("reserved address ranges"),
    }
}

/// Checks one address against the policy.
///
/// # Errors
/// [`Denied`] naming the rule when the address class is not admitted.
pub fn check_ip(policy: &AddressPolicy, host: &str, ip: IpAddr) -> Result<(), Denied> {
    match address_rule(policy, classify(ip)) {
        None => Ok(()),
        Some(rule) => Err(Denied {
            rule: rule.to_owned(),
            target: format!("{host} ({ip})"),
        }),
    }
}

/// Checks a URL against the operator's allow/deny rules and, when the host is an IP literal, the SSRF
/// guard. Hostnames are checked by [`GuardedResolver`] when they are resolved.
///
/// # Errors
/// [`Denied`] naming the rule that refused the URL.
pub fn check_url(options: &HttpOptions, url: &url::Url) -> Result<(), Denied> {
    let text = url.as_str();
    if let Some(rule) = options.deny.iter().find(|m| m.matches(text)) {
        return Err(Denied {
            rule: format!("deny {}", rule.describe()),
            target: text.to_owned(),
        });
    }
    if !options.allow.is_empty() && !options.allow.iter().any(|m| m.matches(text)) {
        return Err(Denied {
            rule: "no allow rule matches".to_owned(),
            target: text.to_owned(),
        });
    }
    match url.host() {
        Some(url::Host::Ipv4(ip)) => check_ip(&options.addresses, text, ip.into()),
        Some(url::Host::Ipv6(ip)) => check_ip(&options.addresses, text, ip.into()),
        _ => Ok(()),
    }
}

/// True when the URL's host is a literal loopback address (or `localhost`): such requests never go
/// through `HTTPS_PROXY`, since a proxy elsewhere cannot reach this host's loopback.
pub fn is_literal_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// A reqwest resolver that admits a host only if every address it resolves to is admitted, and then
/// returns exactly those addresses for reqwest to dial.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    policy: AddressPolicy,
}

impl GuardedResolver {
    /// A resolver enforcing `policy`.
    pub fn new(policy: AddressPolicy) -> Arc<Self> {
        Arc::new(Self { policy })
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // Port 0: reqwest replaces it with the URL's port.
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for addr in &addrs {
                check_ip(&policy, &host, addr.ip())?;
            }
            tracing::debug!(%host, ?addrs, "resolved and vetted");
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn classes() {
        assert_eq!(classify(ip("169.254.169.254")), AddressClass::Metadata);
        assert_eq!(classify(ip("fd00:ec2::254")), AddressClass::Metadata);
        assert_eq!(classify(ip("169.254.1.1")), AddressClass::LinkLocal);
        assert_eq!(classify(ip("fe80::1")), AddressClass::LinkLocal);
        assert_eq!(classify(ip("127.0.0.2")), AddressClass::Loopback);
        assert_eq!(classify(ip("::ffff:127.0.0.1")), AddressClass::Loopback);
        assert_eq!(classify(ip("10.1.2.3")), AddressClass::Private);
        assert_eq!(classify(ip("100.64.0.1")), AddressClass::Private);
        assert_eq!(classify(ip("fd12::1")), AddressClass::Private);
        assert_eq!(classify(ip("0.0.0.0")), AddressClass::Reserved);
        assert_eq!(classify(ip("8.8.8.8")), AddressClass::Public);
        assert_eq!(classify(ip("2606:4700::1")), AddressClass::Public);
    }

    /// The resolver hands reqwest exactly the addresses it vetted (so no second lookup can differ),
    /// and refuses a name when any of its addresses is denied.
    #[tokio::test]
    async fn resolver_returns_only_vetted_addresses() {
        use reqwest::dns::Resolve;
        let policy = HttpOptions::default().addresses;
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        let addrs: Vec<_> = GuardedResolver::new(policy)
            .resolve(name)
            .await
            .unwrap()
            .collect();
        assert!(
            !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()),
            "{addrs:?}"
        );
        let strict = AddressPolicy {
            loopback: false,
            ..policy
        };
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        let Err(err) = GuardedResolver::new(strict).resolve(name).await else {
            panic!("loopback must be refused");
        };
        let denied = err.downcast_ref::<Denied>().expect("a policy denial");
        assert_eq!(denied.rule, "allow_loopback = false");
    }

    #[test]
    fn default_policy_denies_metadata_literal_and_names_rule() {
        let options = HttpOptions::default();
        let url = url::Url::parse("http://169.254.169.254/latest/meta-data").unwrap();
        let denied = check_url(&options, &url).unwrap_err();
        assert!(denied.rule.contains("metadata"), "{denied:?}");
        let url = url::Url::parse("http://127.0.0.1:8080/").unwrap();
        assert!(check_url(&options, &url).is_ok());
    }
}
