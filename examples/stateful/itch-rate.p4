/* An ITCH-like feed with one Add Order per packet (Ethernet, IPv4, UDP port 26400), and state:
 * per stock, the messages and the shares of each 100 ms window (docs/compiler.md, "Stateful
 * subscriptions"). The rules in itch-rate.rules forward a stock's orders to port 2 while the
 * stock is busy. */
#include <core.p4>

const bit<16> TYPE_IPV4 = 0x0800;
const bit<8> PROTO_UDP = 17;
const bit<16> ITCH_PORT = 26400;

header ethernet_t { bit<48> dst_addr; bit<48> src_addr; bit<16> ether_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len; bit<16> identification;
    bit<3> flags; bit<13> frag_offset; bit<8> ttl; bit<8> protocol; bit<16> hdr_checksum;
    bit<32> src_addr; bit<32> dst_addr;
}
header udp_t { bit<16> src_port; bit<16> dst_port; bit<16> length; bit<16> checksum; }
header add_order_t {
    bit<8> msg_type;
    bit<16> stock_locate;
    bit<16> tracking_number;
    bit<48> timestamp;
    bit<64> order_ref;
    bit<8> buy_sell_indicator;
    bit<32> shares;
    bit<64> stock;               // 8 ASCII characters, space-padded
    bit<32> price;               // 4 implied decimals
}

@query_field_exact(add_order.stock, string)
@query_field_range(add_order.price, scale=4)
@query_field_range(add_order.shares)
@query_counter(rate, 100000, 1024, key=add_order.stock)                          // orders per 100 ms, per stock
@query_counter(volume, 100000, 1024, key=add_order.stock, field=add_order.shares) // shares per 100 ms, per stock

struct headers { ethernet_t ethernet; ipv4_t ipv4; udp_t udp; add_order_t add_order; }
struct metadata { }

parser OrderParser(packet_in packet, out headers hdr, inout metadata meta,
                   inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { TYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) { (5, PROTO_UDP): parse_udp; default: accept; }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) { ITCH_PORT: parse_add_order; default: accept; }
    }
    state parse_add_order {
        packet.extract(hdr.add_order);
        transition accept;
    }
}
