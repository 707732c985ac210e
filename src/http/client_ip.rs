//! Which address a request comes from, for the per-address limit (SYSTEM 3.1, 017).
//!
//! Owns `TrustProxy` (parsed from `TRUST_PROXY`) and the walk of `X-Forwarded-For`.
//!
//! Invariants: forwarded headers are believed only when the peer itself is trusted; the walk goes
//! from the right (the entry our trusted proxy appended) and stops at the first untrusted
//! address, so a client cannot choose its address by writing its own `X-Forwarded-For`. An
//! unparseable entry stops the walk at the last address that is known good. With `TRUST_PROXY`
//! empty (the default), the address is always the peer's.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use axum::http::HeaderMap;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

const FORWARDED_FOR: &str = "x-forwarded-for";

/// The proxies whose `X-Forwarded-For` we believe.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustProxy {
    nets: Vec<IpNet>,
}

/// A `TRUST_PROXY` entry that is neither an address, a CIDR range nor a keyword. Entries are
/// counted from 1; the value itself is not repeated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "entry {position} is not an IP address, a CIDR range, or one of loopback, linklocal, uniquelocal"
)]
pub struct TrustProxyError {
    pub position: usize,
}

impl TrustProxy {
    /// Parses a comma-separated list of IP addresses, CIDR ranges and the keywords `loopback`,
    /// `linklocal` and `uniquelocal`. Blank entries are ignored, so an empty value trusts nothing.
    pub fn parse(raw: &str) -> Result<Self, TrustProxyError> {
        let mut nets = Vec::new();
        for (index, entry) in raw.split(',').map(str::trim).enumerate() {
            if entry.is_empty() {
                continue;
            }
            match entry.to_ascii_lowercase().as_str() {
                "loopback" => nets.extend([
                    v4(Ipv4Addr::new(127, 0, 0, 0), 8),
                    v6(Ipv6Addr::LOCALHOST, 128),
                ]),
                "linklocal" => nets.extend([
                    v4(Ipv4Addr::new(169, 254, 0, 0), 16),
                    v6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10),
                ]),
                "uniquelocal" => nets.extend([
                    v4(Ipv4Addr::new(10, 0, 0, 0), 8),
                    v4(Ipv4Addr::new(172, 16, 0, 0), 12),
                    v4(Ipv4Addr::new(192, 168, 0, 0), 16),
                    v6(Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7),
                ]),
                _ => {
                    let net = IpNet::from_str(entry)
                        .or_else(|_| IpAddr::from_str(entry).map(IpNet::from))
                        .map_err(|_| TrustProxyError {
                            position: index + 1,
                        })?;
                    nets.push(canonical_net(net));
                }
            }
        }
        Ok(Self { nets })
    }

    /// True when nothing is trusted (forwarded headers are ignored).
    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn is_trusted(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.nets.iter().any(|net| net.contains(&ip))
    }

    /// The client's address: the peer, unless the peer is a trusted proxy, in which case the
    /// rightmost untrusted address of `X-Forwarded-For` (SYSTEM 3.1).
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.is_trusted(peer) {
            return peer;
        }
        let mut entries: Vec<Option<IpAddr>> = Vec::new();
        for value in headers.get_all(FORWARDED_FOR) {
            match value.to_str() {
                Ok(list) => entries.extend(list.split(',').map(parse_forwarded)),
                Err(_) => entries.push(None),
            }
        }
        let mut current = peer;
        for entry in entries.into_iter().rev() {
            let Some(hop) = entry else {
                return current;
            };
            current = hop;
            if !self.is_trusted(hop) {
                return hop;
            }
        }
        current
    }
}

/// One `X-Forwarded-For` entry: an address, optionally with a port (`1.2.3.4:5`, `[::1]:5`).
fn parse_forwarded(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    IpAddr::from_str(entry)
        .or_else(|_| SocketAddr::from_str(entry).map(|s| s.ip()))
        .ok()
        .map(|ip| ip.to_canonical())
}

/// Ranges written as IPv4-mapped IPv6 are matched as the IPv4 they denote.
fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6net) => match v6net.addr().to_ipv4_mapped() {
            Some(addr) if v6net.prefix_len() >= 96 => {
                Ipv4Net::new(addr, v6net.prefix_len() - 96).map_or(net, IpNet::V4)
            }
            _ => net,
        },
        IpNet::V4(_) => net,
    }
}

fn v4(addr: Ipv4Addr, prefix: u8) -> IpNet {
    // Prefixes here are constants ≤ 32.
    IpNet::V4(Ipv4Net::new(addr, prefix).unwrap_or_default())
}

fn v6(addr: Ipv6Addr, prefix: u8) -> IpNet {
    // Prefixes here are constants ≤ 128.
    IpNet::V6(Ipv6Net::new(addr, prefix).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn xff(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(FORWARDED_FOR, HeaderValue::from_str(v).unwrap());
        }
        headers
    }

    /// With `trust` as TRUST_PROXY, a request from `peer` carrying `forwarded` as its
    /// X-Forwarded-For lines is from `client`.
    fn assert_client(trust: &str, peer: &str, forwarded: &[&str], client: &str) {
        let got = TrustProxy::parse(trust)
            .unwrap()
            .client_ip(ip(peer), &xff(forwarded));
        assert_eq!(got, ip(client), "{trust} / {peer} / {forwarded:?}");
    }

    #[test]
    fn system_3_1_untrusted_peer_xff_is_ignored() {
        assert_client(
            "10.0.0.0/8",
            "198.51.100.9",
            &["203.0.113.7"],
            "198.51.100.9",
        );
    }

    #[test]
    fn system_3_1_empty_trust_proxy_always_uses_the_peer() {
        assert!(TrustProxy::parse("").unwrap().is_empty());
        assert_client("", "127.0.0.1", &["203.0.113.7"], "127.0.0.1");
    }

    #[test]
    fn system_3_1_trusted_peer_yields_rightmost_untrusted_forwarded_address() {
        let trust = "loopback, 10.1.0.0/16";
        // The client wrote a spoofed entry; the proxies appended the real one.
        let spoofed = ["192.0.2.66, 203.0.113.7, 10.1.2.3"];
        assert_client(trust, "127.0.0.1", &spoofed, "203.0.113.7");
        // Split across two header lines, same answer.
        let split = ["192.0.2.66, 203.0.113.7", "10.1.2.3"];
        assert_client(trust, "127.0.0.1", &split, "203.0.113.7");
    }

    #[test]
    fn system_3_1_trusted_peer_without_xff_is_the_client() {
        assert_client("loopback", "::1", &[], "::1");
    }

    #[test]
    fn system_3_1_all_trusted_chain_yields_the_leftmost() {
        assert_client(
            "uniquelocal",
            "172.16.0.1",
            &["10.0.0.5, 192.168.1.1"],
            "10.0.0.5",
        );
    }

    #[test]
    fn system_3_1_malformed_entry_stops_at_the_last_good_hop() {
        let forwarded = ["203.0.113.7, not-an-ip, 10.0.0.2"];
        assert_client("10.0.0.1, 10.0.0.2", "10.0.0.1", &forwarded, "10.0.0.2");
    }

    #[test]
    fn system_3_1_forwarded_entries_with_ports_and_mapped_peers() {
        let trust = "127.0.0.1";
        assert_client(
            trust,
            "::ffff:127.0.0.1",
            &["[2001:db8::7]:4711"],
            "2001:db8::7",
        );
        assert_client(trust, "127.0.0.1", &["203.0.113.7:8080"], "203.0.113.7");
    }

    #[test]
    fn system_3_1_trust_proxy_keywords_cover_their_ranges() {
        let table = [
            ("loopback", "127.0.0.1", true),
            ("loopback", "127.255.0.9", true),
            ("loopback", "::1", true),
            ("loopback", "10.0.0.1", false),
            ("linklocal", "169.254.10.1", true),
            ("linklocal", "fe80::1", true),
            ("linklocal", "192.168.0.1", false),
            ("uniquelocal", "10.9.9.9", true),
            ("uniquelocal", "172.31.0.1", true),
            ("uniquelocal", "172.32.0.1", false),
            ("uniquelocal", "192.168.5.5", true),
            ("uniquelocal", "fd00::1", true),
            ("uniquelocal", "203.0.113.1", false),
            ("203.0.113.1", "203.0.113.1", true),
            ("203.0.113.1", "203.0.113.2", false),
            ("2001:db8::/32", "2001:db8:1::1", true),
            ("::ffff:192.0.2.0/120", "192.0.2.9", true),
        ];
        for (config, addr, trusted) in table {
            let trust = TrustProxy::parse(config).unwrap();
            assert_eq!(trust.is_trusted(ip(addr)), trusted, "{config} / {addr}");
        }
    }

    #[test]
    fn system_3_1_trust_proxy_rejects_unknown_entries_by_position() {
        assert_eq!(
            TrustProxy::parse("loopback, everything"),
            Err(TrustProxyError { position: 2 })
        );
        assert_eq!(
            TrustProxy::parse("10.0.0.0/33"),
            Err(TrustProxyError { position: 1 })
        );
        assert!(TrustProxy::parse(" , loopback ,").is_ok());
    }
}
