/* -*- P4_16 -*- */
// p4sub protocol spec: P4.org In-band Network Telemetry v2.1, INT-MD over UDP
// (Ethernet / IPv4 / UDP / INT shim / INT-MD metadata header / per-hop metadata stack).
//
// Fixed instruction set. The INT-MD instruction bitmap of the packets this spec reads is
// INT_INSTRUCTIONS = 0xF000: bits 0-3 (bit 0 is the most significant), i.e. per hop
//   bit 0  node id                                  switch_id        32
//   bit 1  L1 ingress / egress interface id         ingress_port_id  16, egress_port_id 16
//   bit 2  hop latency                              hop_latency      32
//   bit 3  queue id / queue occupancy               queue_id 8,      queue_occupancy 24
// so every hop pushes Hop ML = 4 words (16 bytes). Packets with another bitmap or Hop ML are
// accepted with only the shim and the metadata header parsed (the int_hop stack stays empty).
//
// UDP port. INT has no IANA port; the spec's choice is the constant INT_UDP_PORT (0x1234).
// Change it here to match a deployment; nothing else depends on the value.
//
// Hop count. The shim's len counts the INT-MD header (3 words) and the stack, in 4-byte words,
// without the shim itself, so a packet with N hops has len = 3 + 4 * N. The parser selects on
// it and runs a chain of N extracts (hops_N has N hops to go). int_hop[0] is the newest hop
// (the last switch that pushed), as INT stacks grow at the top. Packets with more than MAX_HOPS
// hops are accepted without reading the stack.

#include <core.p4>
#include <v1model.p4>

#ifndef P4SUB_INT_P4
#define P4SUB_INT_P4

const bit<16> ETHERTYPE_IPV4 = 16w0x0800;
const bit<8>  IP_PROTO_UDP = 8w17;
const bit<16> INT_UDP_PORT = 16w0x1234;
const bit<4>  INT_TYPE_MD = 4w1;             // shim type 1: INT-MD
const bit<16> INT_INSTRUCTIONS = 16w0xF000;  // the fixed instruction set above
const bit<5>  INT_HOP_ML = 5w4;              // words each hop pushes
const bit<8>  INT_MD_WORDS = 8w3;            // the INT-MD metadata header, in words
const bit<32> MAX_HOPS = 8;

typedef bit<48> mac_addr_t;
typedef bit<32> ip4_addr_t;

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv4_t {
    bit<4>     version;
    bit<4>     ihl;
    bit<8>     diffserv;
    bit<16>    total_len;
    bit<16>    identification;
    bit<3>     flags;
    bit<13>    frag_offset;
    bit<8>     ttl;
    bit<8>     protocol;
    bit<16>    hdr_checksum;
    ip4_addr_t src_addr;
    ip4_addr_t dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

// INT shim header for TCP/UDP (4 bytes).
header int_shim_t {
    bit<4>  int_type;     // 1 INT-MD, 2 INT-Destination, 3 INT-MX ("type" is a P4 keyword)
    bit<2>  npt;          // next protocol type: what udp_ip_dscp holds
    bit<2>  res;
    bit<8>  len;          // INT-MD header + stack, in 4-byte words, without the shim
    bit<16> udp_ip_dscp;  // original UDP port / IP protocol / DSCP, per npt
}

// INT-MD metadata header (12 bytes).
header int_md_t {
    bit<4>  ver;                 // 2
    bit<1>  d;                   // discard at the sink
    bit<1>  e;                   // maximum hop count exceeded
    bit<1>  m;                   // MTU exceeded
    bit<12> reserved;
    bit<5>  hop_ml;              // words pushed per hop
    bit<8>  remaining_hop_cnt;
    bit<16> instruction_bitmap;
    bit<16> domain_id;
    bit<16> ds_instruction;
    bit<16> ds_flags;
}

// What each hop pushes under INT_INSTRUCTIONS (16 bytes).
header int_hop_t {
    bit<32> switch_id;
    bit<16> ingress_port_id;
    bit<16> egress_port_id;
    bit<32> hop_latency;
    bit<8>  queue_id;
    bit<24> queue_occupancy;
}

@query_field_exact(int_hop.switch_id)
@query_field_range(int_hop.hop_latency)
@query_field_range(int_hop.queue_occupancy)

struct headers {
    ethernet_t           ethernet;
    ipv4_t               ipv4;
    udp_t                udp;
    int_shim_t           int_shim;
    int_md_t             int_md;
    int_hop_t[MAX_HOPS]  int_hop;
}

struct metadata {
}

parser IntParser(packet_in packet,
                 out headers hdr,
                 inout metadata meta,
                 inout standard_metadata_t standard_metadata) {

    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    // Only unfragmented IPv4 without options carries a UDP header right after 20 bytes.
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            INT_UDP_PORT: parse_int_shim;
            default: accept;
        }
    }

    state parse_int_shim {
        packet.extract(hdr.int_shim);
        transition select(hdr.int_shim.int_type) {
            INT_TYPE_MD: parse_int_md;
            default: accept;
        }
    }

    // len = INT_MD_WORDS + INT_HOP_ML * hops
    state parse_int_md {
        packet.extract(hdr.int_md);
        transition select(hdr.int_md.instruction_bitmap, hdr.int_md.hop_ml, hdr.int_shim.len) {
            (INT_INSTRUCTIONS, INT_HOP_ML, 3): accept;
            (INT_INSTRUCTIONS, INT_HOP_ML, 7): hops_1;
            (INT_INSTRUCTIONS, INT_HOP_ML, 11): hops_2;
            (INT_INSTRUCTIONS, INT_HOP_ML, 15): hops_3;
            (INT_INSTRUCTIONS, INT_HOP_ML, 19): hops_4;
            (INT_INSTRUCTIONS, INT_HOP_ML, 23): hops_5;
            (INT_INSTRUCTIONS, INT_HOP_ML, 27): hops_6;
            (INT_INSTRUCTIONS, INT_HOP_ML, 31): hops_7;
            (INT_INSTRUCTIONS, INT_HOP_ML, 35): hops_8;
            default: accept;
        }
    }

    state hops_8 {
        packet.extract(hdr.int_hop.next);
        transition hops_7;
    }

    state hops_7 {
        packet.extract(hdr.int_hop.next);
        transition hops_6;
    }

    state hops_6 {
        packet.extract(hdr.int_hop.next);
        transition hops_5;
    }

    state hops_5 {
        packet.extract(hdr.int_hop.next);
        transition hops_4;
    }

    state hops_4 {
        packet.extract(hdr.int_hop.next);
        transition hops_3;
    }

    state hops_3 {
        packet.extract(hdr.int_hop.next);
        transition hops_2;
    }

    state hops_2 {
        packet.extract(hdr.int_hop.next);
        transition hops_1;
    }

    state hops_1 {
        packet.extract(hdr.int_hop.next);
        transition accept;
    }
}

#endif  // P4SUB_INT_P4
