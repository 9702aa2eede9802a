//! The private-address guard for URLs Tern fetches or posts to on a customer's word (media
//! imports, event-webhook targets): https only, and never an address inside the machine's
//! own networks — loopback, private, link-local (cloud metadata at 169.254.169.254),
//! unique-local, multicast, unspecified, shared (carrier-grade NAT) and the other
//! special-purpose ranges that are not globally reachable — unless the operator allowed the
//! network (`TERN_ALLOW_NETWORKS`).
//!
//! No I/O here. [`Guard::check_url`] judges a URL whose host is an address literal in any
//! spelling the URL standard accepts (the `url` crate normalises decimal `2130706433`, hex
//! `0x7f.1`, octal `0177.0.0.1` and short `127.1` forms; IPv6 literals too); a host name is
//! judged by [`Guard::check_ip`] on every address it resolves to and is connected to (so a
//! DNS answer cannot rebind it), and again on every redirect. IPv4 addresses carried inside
//! IPv6 (IPv4-mapped, IPv4-compatible, NAT64, 6to4) are judged as the IPv4 address they
//! reach.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use url::{Host, Url};

/// Why a URL or address is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("must be a valid URL")]
    Invalid,
    #[error("must use https")]
    NotHttps,
    #[error("must not carry a user name or password")]
    Credentials,
    #[error("must not point to a {range} address ({ip})")]
    Forbidden { ip: IpAddr, range: &'static str },
}

/// The guard with the operator's allowed networks.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    allow: Vec<IpNet>,
}

impl Guard {
    pub fn new(allow: Vec<IpNet>) -> Self {
        Guard { allow }
    }

    /// A URL the importer may fetch: https, no credentials, and an address-literal host
    /// outside the forbidden ranges. A host name passes here; its addresses are checked
    /// with [`Guard::check_ip`] when connecting.
    pub fn check_url(&self, raw: &str) -> Result<Url, Refusal> {
        let url = Url::parse(raw.trim()).map_err(|_| Refusal::Invalid)?;
        if url.scheme() != "https" {
            return Err(Refusal::NotHttps);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refusal::Credentials);
        }
        match url.host() {
            Some(Host::Ipv4(ip)) => self.check_ip(IpAddr::V4(ip))?,
            Some(Host::Ipv6(ip)) => self.check_ip(IpAddr::V6(ip))?,
            Some(Host::Domain("")) => return Err(Refusal::Invalid),
            Some(Host::Domain(_)) => {}
            None => return Err(Refusal::Invalid),
        }
        Ok(url)
    }

    /// An address Tern may connect to: outside the forbidden ranges, or inside a network
    /// the operator allowed (an IPv4 address carried in IPv6 is matched as itself too).
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), Refusal> {
        let Some(range) = forbidden_range(ip) else {
            return Ok(());
        };
        let inner = embedded_v4(ip).map(IpAddr::V4);
        let allowed = self
            .allow
            .iter()
            .any(|n| n.contains(&ip) || inner.is_some_and(|v4| n.contains(&v4)));
        if allowed {
            Ok(())
        } else {
            Err(Refusal::Forbidden { ip, range })
        }
    }
}

/// The kind of range a forbidden address is in (`None`: globally reachable).
pub fn forbidden_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_range(v4),
        IpAddr::V6(v6) => match embedded_v4(IpAddr::V6(v6)) {
            Some(v4) => v4_range(v4),
            None => v6_range(v6),
        },
    }
}

fn v4_range(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, _, _) => "unspecified",
        (10, _, _) | (172, 16..=31, _) | (192, 168, _) => "private",
        (100, 64..=127, _) => "shared",
        (127, _, _) => "loopback",
        (169, 254, _) => "link-local",
        (192, 0, 0) | (192, 88, 99) => "reserved",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (198, 18..=19, _) => "benchmarking",
        (224..=239, _, _) => "multicast",
        (240..=255, _, _) => "reserved",
        _ => return None,
    })
}

fn v6_range(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    Some(if ip.is_unspecified() {
        "unspecified"
    } else if ip.is_loopback() {
        "loopback"
    } else if s[0] & 0xfe00 == 0xfc00 {
        "unique-local"
    } else if s[0] & 0xffc0 == 0xfe80 {
        "link-local"
    } else if s[0] & 0xffc0 == 0xfec0 {
        "private" // site-local (deprecated)
    } else if s[0] & 0xff00 == 0xff00 {
        "multicast"
    } else if s[0] == 0x2001 && s[1] == 0x0db8 {
        "documentation"
    } else if (s[0] == 0x2001 && s[1] == 0) || (s[0] == 0x0100 && s[1..4] == [0, 0, 0]) {
        "reserved" // Teredo; discard-only
    } else if s[0] == 0x0064 && s[1] == 0xff9b && s[2] == 1 {
        "private" // local-use NAT64
    } else {
        return None;
    })
}

/// The IPv4 address an IPv6 address carries and reaches: IPv4-mapped `::ffff:a.b.c.d`,
/// IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::`.
fn embedded_v4(ip: IpAddr) -> Option<Ipv4Addr> {
    let IpAddr::V6(v6) = ip else { return None };
    let s = v6.segments();
    let tail = || Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(tail()),
        // `::` and `::1` are IPv6's own unspecified and loopback.
        [0, 0, 0, 0, 0, 0, 0, 0..=1] => None,
        [0, 0, 0, 0, 0, 0, _, _] | [0x0064, 0xff9b, 0, 0, 0, 0, _, _] => Some(tail()),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(url: &str) -> Option<&'static str> {
        match Guard::default().check_url(url) {
            Err(Refusal::Forbidden { range, .. }) => Some(range),
            Err(e) => panic!("{url}: {e:?}"),
            Ok(_) => None,
        }
    }

    #[test]
    fn every_range_is_refused() {
        let cases = [
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("10.0.0.1", "private"),
            ("10.255.255.255", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.254", "private"),
            ("192.168.1.1", "private"),
            ("100.64.0.1", "shared"),
            ("100.100.100.200", "shared"),
            ("127.0.0.1", "loopback"),
            ("127.255.255.254", "loopback"),
            ("169.254.169.254", "link-local"),
            ("169.254.0.1", "link-local"),
            ("192.0.0.192", "reserved"),
            ("192.0.2.10", "documentation"),
            ("198.51.100.1", "documentation"),
            ("203.0.113.9", "documentation"),
            ("198.18.0.1", "benchmarking"),
            ("224.0.0.251", "multicast"),
            ("239.255.255.250", "multicast"),
            ("240.0.0.1", "reserved"),
            ("255.255.255.255", "reserved"),
            ("[::]", "unspecified"),
            ("[::1]", "loopback"),
            ("[fc00::1]", "unique-local"),
            ("[fd00:ec2::254]", "unique-local"),
            ("[fe80::1]", "link-local"),
            ("[febf::1]", "link-local"),
            ("[fec0::1]", "private"),
            ("[ff02::1]", "multicast"),
            ("[2001:db8::1]", "documentation"),
            ("[2001:0:4136:e378::1]", "reserved"),
            ("[100::1]", "reserved"),
            ("[64:ff9b:1::1]", "private"),
        ];
        for (host, range) in cases {
            assert_eq!(
                refused(&format!("https://{host}/file.jpg")),
                Some(range),
                "{host}"
            );
        }
    }

    #[test]
    fn every_spelling_of_an_address_is_the_address() {
        for url in [
            "https://2130706433/",         // decimal
            "https://0x7f000001/",         // hex
            "https://0x7f.0x0.0x0.0x1/",   // hex parts
            "https://017700000001/",       // octal
            "https://0177.0.0.01/",        // octal parts
            "https://127.1/",              // short form
            "https://127.0.1/",            // short form
            "https://127.000.000.001/",    // leading zeros (octal)
            "https://[::ffff:127.0.0.1]/", // IPv4-mapped
            "https://[::ffff:7f00:1]/",    // IPv4-mapped, hex
            "https://[0:0:0:0:0:ffff:127.0.0.1]:8443/x",
            "https://[::127.0.0.1]/",     // IPv4-compatible
            "https://[64:ff9b::7f00:1]/", // NAT64
            "https://[2002:7f00:1::]/",   // 6to4
        ] {
            assert_eq!(refused(url), Some("loopback"), "{url}");
        }
        assert_eq!(refused("https://0/"), Some("unspecified"));
        assert_eq!(refused("https://0xa9fea9fe/"), Some("link-local")); // 169.254.169.254
        assert_eq!(refused("https://[::ffff:a9fe:a9fe]/"), Some("link-local"));
        assert_eq!(refused("https://[2002:a00:1::]/"), Some("private"));
    }

    #[test]
    fn public_addresses_and_names_pass() {
        let g = Guard::default();
        for url in [
            "https://93.184.216.34/a.png",
            "https://8.8.8.8/",
            "https://[2606:4700:4700::1111]/",
            "https://[::ffff:8.8.8.8]/",
            "https://172.32.0.1/",
            "https://100.128.0.1/",
            "https://cdn.example.com/img.jpg?x=1",
        ] {
            assert!(g.check_url(url).is_ok(), "{url}");
        }
    }

    #[test]
    fn scheme_credentials_and_garbage() {
        let g = Guard::default();
        assert_eq!(
            g.check_url("http://example.com/a").unwrap_err(),
            Refusal::NotHttps
        );
        assert_eq!(
            g.check_url("ftp://example.com/a").unwrap_err(),
            Refusal::NotHttps
        );
        assert_eq!(
            g.check_url("file:///etc/passwd").unwrap_err(),
            Refusal::NotHttps
        );
        assert_eq!(
            g.check_url("https://user:pw@example.com/").unwrap_err(),
            Refusal::Credentials
        );
        assert_eq!(
            g.check_url("HTTPS://LOCALHOST.localdomain.:443@127.0.0.1/")
                .unwrap_err(),
            Refusal::Credentials
        );
        for bad in ["", "not a url", "https://", "https://[::1/"] {
            assert_eq!(g.check_url(bad).unwrap_err(), Refusal::Invalid, "{bad:?}");
        }
    }

    #[test]
    fn allowed_networks_are_exempt() {
        let g = Guard::new(vec![
            "127.0.0.0/8".parse().unwrap(),
            "fd00:1::/32".parse().unwrap(),
        ]);
        assert!(g.check_url("https://127.0.0.1:8443/x").is_ok());
        assert!(g.check_url("https://[::ffff:127.0.0.1]/").is_ok());
        assert!(g.check_ip("fd00:1::5".parse().unwrap()).is_ok());
        assert_eq!(
            g.check_ip("10.0.0.1".parse().unwrap()),
            Err(Refusal::Forbidden {
                ip: "10.0.0.1".parse().unwrap(),
                range: "private"
            })
        );
        assert!(g.check_ip("::1".parse().unwrap()).is_err());
        assert!(g.check_ip("fd00:2::5".parse().unwrap()).is_err());
    }
}
