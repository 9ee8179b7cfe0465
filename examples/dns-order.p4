/* -*- P4_16 -*- */
// p4sub protocol spec: two small protocols over UDP/IPv4/Ethernet that never share a packet, a
// DNS-like query header and an order-entry message, with optional 802.1Q tags and IPv4 options.
//
// It is the example of a user's own protocol (docs/replay.md): `p4sub gen --spec` writes traces
// for it, `p4sub replay` / `p4sub netsim` read them with this parser. Rules over dns.* apply to
// DNS packets only and rules over order.* to orders only (header validity is part of the match).
//
// Select cases: the UDP destination port picks the protocol (53: DNS; 4096..8191, a mask: orders).
// IPv4 options are skipped with packet.advance by the header length; DNS fields are not byte
// aligned (qr, opcode, flags, rcode). All fields are big-endian; strings are left-aligned ASCII
// padded with spaces.

#include <core.p4>
#include <v1model.p4>

#ifndef P4SUB_DNS_ORDER_P4
#define P4SUB_DNS_ORDER_P4

const bit<16> ETHERTYPE_IPV4 = 16w0x0800;
const bit<16> ETHERTYPE_VLAN = 16w0x8100;
const bit<8>  IP_PROTO_UDP = 8w17;
const bit<16> DNS_PORT = 16w53;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header vlan_t {
    bit<3>  pcp;
    bit<1>  dei;
    bit<12> vid;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

// A DNS header and its first question, with the name reduced to one 8-character label.
header dns_t {
    bit<16> id;
    bit<1>  qr;
    bit<4>  opcode;
    bit<1>  aa;
    bit<1>  tc;
    bit<1>  rd;
    bit<1>  ra;
    bit<3>  z;
    bit<4>  rcode;
    bit<16> qdcount;
    bit<64> qname;      // 8 ASCII characters, space-padded
    bit<16> qtype;
}

header order_t {
    bit<8>  msg_type;
    bit<32> shares;
    bit<8>  side;       // 'B' or 'S'
    bit<64> symbol;     // 8 ASCII characters, space-padded
    bit<32> price;      // Price(4)
}

@query_field_exact(dns.qname, string)
@query_field(dns.qtype)
@query_field(dns.opcode)
@query_field_range(order.shares)
@query_field_exact(order.side, string)
@query_field(order.symbol, string)
@query_field_range(order.price, scale=4)
@query_field_lpm(ipv4.dst_addr)

struct headers {
    ethernet_t ethernet;
    vlan_t     vlan;
    ipv4_t     ipv4;
    udp_t      udp;
    dns_t      dns;
    order_t    order;
}

struct metadata {
}

parser DnsOrderParser(packet_in packet,
                      out headers hdr,
                      inout metadata meta,
                      inout standard_metadata_t standard_metadata) {

    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_VLAN: parse_vlan;
            default: accept;
        }
    }

    state parse_vlan {
        packet.extract(hdr.vlan);
        transition select(hdr.vlan.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, IP_PROTO_UDP): parse_ipv4_options;
            default: accept;
        }
    }

    // Options: ihl counts 32-bit words, 5 of them the fixed header (ihl < 5 wraps and runs off the packet).
    state parse_ipv4_options {
        packet.advance(((bit<32>)(hdr.ipv4.ihl - 5)) * 32);
        transition parse_udp;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            DNS_PORT: parse_dns;
            0x1000 &&& 0xF000: parse_order;     // ports 4096..8191
            default: accept;
        }
    }

    state parse_dns {
        packet.extract(hdr.dns);
        transition accept;
    }

    state parse_order {
        packet.extract(hdr.order);
        transition accept;
    }
}

#endif  // P4SUB_DNS_ORDER_P4
