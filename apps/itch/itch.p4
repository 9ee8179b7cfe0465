/* -*- P4_16 -*- */
// p4sub protocol spec: Nasdaq TotalView-ITCH 5.0 over MoldUDP64 over UDP/IPv4/Ethernet.
//
// A MoldUDP64 packet (20-byte header: session 10 B, sequence number 8 B, message count 2 B)
// carries up to a dozen message blocks; each block is a 2-byte length and an ITCH message whose
// first byte is its type. Add Order ('A', 36 bytes) bodies are extracted into the add_order
// stack, other messages are skipped with packet.advance. All fields are big-endian; Alpha fields
// (stock, buy_sell_indicator) are left-aligned ASCII padded with spaces; Price(4) has 4 implied
// decimal digits.
//
// Stacks: mold_msg[i] is the i-th message block of the packet; add_order[j] is the j-th Add
// Order in it (j <= i). Packets with more than MAX_MSGS blocks are parsed up to MAX_MSGS.
//
// The parser is unrolled by the number of blocks left (msgs_N has N blocks to go) instead of
// counting in metadata: every target (BMv2, Tofino) accepts a chain of plain states, and the
// parse graph stays "extract, advance, select on header fields" with nothing else to model.

#include <core.p4>
#include <v1model.p4>

#ifndef P4SUB_ITCH_P4
#define P4SUB_ITCH_P4

const bit<16> ETHERTYPE_IPV4 = 16w0x0800;
const bit<8>  IP_PROTO_UDP = 8w17;
const bit<16> MOLDUDP_PORT = 16w1234;        // UDP destination port of the feed (Camus examples use 1234)
const bit<16> MOLD_HEARTBEAT = 16w0;         // message count of a heartbeat
const bit<16> MOLD_END_OF_SESSION = 16w0xFFFF;
const bit<8>  ITCH_ADD_ORDER = 8w0x41;       // 'A'
const bit<32> MAX_MSGS = 12;                 // Camus feeds batch up to a dozen messages per packet

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

// MoldUDP64 downstream header.
header moldudp_t {
    bit<80> session;
    bit<64> seq;        // sequence number of the first message in the packet
    bit<16> msg_cnt;    // 0: heartbeat, 0xFFFF: end of session
}

// A message block: its length (counting the type byte) and the ITCH message type.
header mold_msg_t {
    bit<16> msg_len;
    bit<8>  msg_type;
}

// ITCH 5.0 Add Order (no MPID attribution), the 35 bytes after the type byte.
header add_order_t {
    bit<16> stock_locate;
    bit<16> tracking_number;
    bit<48> timestamp;           // nanoseconds since midnight
    bit<64> order_ref_number;
    bit<8>  buy_sell_indicator;  // 'B' or 'S'
    bit<32> shares;
    bit<64> stock;               // 8 ASCII characters, space-padded
    bit<32> price;               // Price(4): 1234500 is 123.4500
}

@query_field(add_order.stock, string)
@query_field_range(add_order.price, scale=4)
@query_field_range(add_order.shares)
@query_field_exact(add_order.buy_sell_indicator, string)
@query_field_lpm(ipv4.dst_addr)
@query_counter(msg_rate, 100000, 4)          // messages per 100 ms window, 4 slots

struct headers {
    ethernet_t               ethernet;
    ipv4_t                   ipv4;
    udp_t                    udp;
    moldudp_t                moldudp;
    mold_msg_t[MAX_MSGS]     mold_msg;
    add_order_t[MAX_MSGS]    add_order;
}

struct metadata {
}

parser ItchParser(packet_in packet,
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
            MOLDUDP_PORT: parse_moldudp;
            default: accept;
        }
    }

    state parse_moldudp {
        packet.extract(hdr.moldudp);
        transition select(hdr.moldudp.msg_cnt) {
            MOLD_HEARTBEAT: accept;
            MOLD_END_OF_SESSION: accept;
            1: msgs_1;
            2: msgs_2;
            3: msgs_3;
            4: msgs_4;
            5: msgs_5;
            6: msgs_6;
            7: msgs_7;
            8: msgs_8;
            9: msgs_9;
            10: msgs_10;
            11: msgs_11;
            12: msgs_12;
            default: msgs_12;              // more than MAX_MSGS: the first MAX_MSGS
        }
    }

    state msgs_12 {
        packet.extract(hdr.mold_msg.next);
        transition select(hdr.mold_msg.last.msg_type) {
            ITCH_ADD_ORDER: add_order_12;
            default: skip_12;
        }
    }

    state add_order_12 {
        packet.extract(hdr.add_order.next);
        transition msgs_11;
    }

    state skip_12 {
        packet.advance(((bit<32>)(hdr.mold_msg.last.msg_len - 1)) * 8);
        transition msgs_11;
    }

    state msgs_11 {
        packet.extract(hdr.mold_msg.next);
        transition select(hdr.mold_msg.last.msg_type) {
            ITCH_ADD_ORDER: add_order_11;
            default: skip_11;
        }
    }

    state add_order_11 {
        packet.extract(hdr.add_order.next);
        transition msgs_10;
    }

    state skip_11 {
        packet.advance(((bit<32>)(hdr.mold_msg.last.msg_len - 1)) * 8);
        transition msgs_10;
    }

    state msgs_10 {
        packet.extract(hdr.mold_msg.next);
        transition select(hdr.mold_msg.last.msg_type) {
            ITCH_ADD_ORDER: add_order_10;
            default: skip_10;
        }
    }

    state add_order_10 {
        packet.extract(hdr.add_order.next);
        transition msgs_9;
    }

    state skip_10 {
        packet.advance(((bit<32>)(hdr.mold_msg.last.msg_len - 1)) * 8);
        transition msgs_9;
    }

    state msgs_9 {
        packet.extract(hdr.mold_msg.next);
        transition select(hdr.mold_msg.last.msg_type) {
            ITCH_ADD_ORDER: add_order_9;
            default: skip_9;
        }
    }

    state add_order_9 {
        packet.extract(hdr.add_order.next);
        transition msgs_8;
    }

    state skip_9 {
        packet.advance(((bit<32>)(hdr.mold_msg.last.msg_len - 1)) * 8);
        transition msgs_8;
    }

    state msgs_8 {
        packet.extract(hdr.mold_msg.next);
        transition select(hdr.mold_msg.last.msg_type) {
            ITCH_ADD_ORDER: add_order_8;
            default: skip_8;
        }
    }

    state add_order_8 {
        packet.extract(hdr.add_order.next);
        transition msgs_7;
    }

    state skip_8 {
        packet.advance(((bit<32>)(hdr.mold_msg.last.msg_len - 1)) * 8);
        transition msgs_7;
    }

    state msgs_7 {
        packet.extract(hdr.mold_msg.next);
        transition select(hdr.mold_msg.last.msg_type) {
            ITCH_ADD_ORDER: add_order_7;
            default: skip_7;
        }
    }

    state add_order_7 {
        packet.extract(hdr.add_order.next);
        transition msgs_6;
    }

    state skip_7 {
        packet.advance(((bit<32>)(hdr.mold_msg.last.msg_len - 1)) * 8);
        transition msgs_6;
    }

    state msgs_6 {
        packet.extract(hdr.mold_msg.next);
        transition select(hdr.mold_msg.last.msg_type) {
            ITCH_ADD_ORDER: add_order_6;
            default: skip_6;
        }
    }

    state add_order_6 {
        packet.extract(hdr.add_order.next);
        transition msgs_5;
    }

    state skip_6 {
        packet.advance(((bit<32>)(hdr.mold_msg.last.msg_len - 1)) * 8);
        transition msgs_5;
    }

    state msgs_5 {
        packet.extract(hdr.mold_msg.next);
        transition select(hdr.mold_msg.last.msg_type) {
            ITCH_ADD_ORDER: add_order_5;
            default: skip_5;
        }
    }

    state add_order_5 {
        packet.extract(hdr.add_order.next);
        transition msgs_4;
    }

    state skip_5 {
        packet.advance(((bit<32>)(hdr.mold_msg.last.msg_len - 1)) * 8);
        transition msgs_4;
    }

    state msgs_4 {
        packet.extract(hdr.mold_msg.next);
        transition select(hdr.mold_msg.last.msg_type) {
            ITCH_ADD_ORDER: add_order_4;
            default: skip_4;
        }
    }

    state add_order_4 {
        packet.extract(hdr.add_order.next);
        transition msgs_3;
    }

    state skip_4 {
        packet.advance(((bit<32>)(hdr.mold_msg.last.msg_len - 1)) * 8);
        transition msgs_3;
    }

    state msgs_3 {
        packet.extract(hdr.mold_msg.next);
        transition select(hdr.mold_msg.last.msg_type) {
            ITCH_ADD_ORDER: add_order_3;
            default: skip_3;
        }
    }

    state add_order_3 {
        packet.extract(hdr.add_order.next);
        transition msgs_2;
    }

    state skip_3 {
        packet.advance(((bit<32>)(hdr.mold_msg.last.msg_len - 1)) * 8);
        transition msgs_2;
    }

    state msgs_2 {
        packet.extract(hdr.mold_msg.next);
        transition select(hdr.mold_msg.last.msg_type) {
            ITCH_ADD_ORDER: add_order_2;
            default: skip_2;
        }
    }

    state add_order_2 {
        packet.extract(hdr.add_order.next);
        transition msgs_1;
    }

    state skip_2 {
        packet.advance(((bit<32>)(hdr.mold_msg.last.msg_len - 1)) * 8);
        transition msgs_1;
    }

    state msgs_1 {
        packet.extract(hdr.mold_msg.next);
        transition select(hdr.mold_msg.last.msg_type) {
            ITCH_ADD_ORDER: add_order_1;
            default: skip_1;
        }
    }

    state add_order_1 {
        packet.extract(hdr.add_order.next);
        transition accept;
    }

    state skip_1 {
        packet.advance(((bit<32>)(hdr.mold_msg.last.msg_len - 1)) * 8);
        transition accept;
    }
}

#endif  // P4SUB_ITCH_P4
