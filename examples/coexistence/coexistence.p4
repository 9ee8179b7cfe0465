/* Four protocols on one switch: plain IPv4, ITCH Add Orders over MoldUDP64, DNS queries and INT
 * reports, each with its own subscriptions (rules.sub). No packet carries more than one of the
 * application headers, so each rule applies exactly when the headers it reads are valid: p4sub
 * tests validity where it matters (docs/compiler.md, "Header validity").
 *
 * The header and field names follow Camus's coexistence applications, so rules written for those
 * (add_order.shares, dns_query.label, int_switch_id.switch_id, ...) read the same here. The layouts
 * are simplified where the real protocol does not matter to matching: the DNS query is its first
 * four name bytes, and the INT report carries one hop's switch id and latency after a 4-byte shim.
 */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  IP_PROTO_UDP   = 17;
const bit<16> PORT_DNS       = 53;
const bit<16> PORT_ITCH      = 1234;
const bit<16> PORT_INT       = 5000;
const bit<8>  ITCH_ADD_ORDER = 0x41;   // 'A'

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
header udp_t { bit<16> srcPort; bit<16> dstPort; bit<16> length_; bit<16> checksum; }

header moldudp_hdr_t { bit<80> session; bit<64> seq; bit<16> msg_cnt; }
header moldudp_msg_t { bit<16> msg_len; }
header itch_msg_type_t { bit<8> msg_type; }
header itch_add_order_t {
    bit<16> stock_locate; bit<16> tracking_number; bit<48> timestamp_ns; bit<64> order_ref_number;
    bit<8> buy_sell_indicator; bit<32> shares; bit<64> stock; bit<32> price;
}

header dns_hdr_t { bit<16> id; bit<16> flags; bit<16> qdcount; bit<16> ancount; bit<16> nscount; bit<16> arcount; }
header dns_query_t { bit<32> label; }

header int_shim_t { bit<8> int_type; bit<8> reserved; bit<8> len; bit<8> next_proto; }
header int_switch_id_t { bit<32> switch_id; }
header int_hop_latency_t { bit<32> hop_latency; }

@query_field_exact(ethernet.dstAddr)
@query_field_exact(ipv4.dstAddr)
@query_field_exact(add_order.shares)
@query_field(add_order.price)
@query_field(add_order.stock, string)
@query_field_exact(dns_query.label, string)
@query_field_exact(int_switch_id.switch_id)
@query_field(int_hop_latency.hop_latency)
@query_action(answerDNS, 32)

struct headers {
    ethernet_t        ethernet;
    ipv4_t            ipv4;
    udp_t             udp;
    moldudp_hdr_t     mold_hdr;
    moldudp_msg_t     mold_msg;
    itch_msg_type_t   itch_msg_type;
    itch_add_order_t  add_order;
    dns_hdr_t         dns_hdr;
    dns_query_t       dns_query;
    int_shim_t        int_shim;
    int_switch_id_t   int_switch_id;
    int_hop_latency_t int_hop_latency;
}
struct metadata { }

parser CoexistenceParser(packet_in packet, out headers hdr, inout metadata meta,
                         inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { ETHERTYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) { (5, IP_PROTO_UDP): parse_udp; default: accept; }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort) {
            PORT_ITCH: parse_moldudp;
            PORT_DNS: parse_dns;
            PORT_INT: parse_int;
            default: accept;
        }
    }
    state parse_moldudp {
        packet.extract(hdr.mold_hdr);
        packet.extract(hdr.mold_msg);
        packet.extract(hdr.itch_msg_type);
        transition select(hdr.itch_msg_type.msg_type) { ITCH_ADD_ORDER: parse_add_order; default: accept; }
    }
    state parse_add_order { packet.extract(hdr.add_order); transition accept; }
    state parse_dns {
        packet.extract(hdr.dns_hdr);
        // A query (QR bit clear) with one question.
        transition select(hdr.dns_hdr.flags, hdr.dns_hdr.qdcount) { (0 &&& 0x8000, 1): parse_dns_query; default: accept; }
    }
    state parse_dns_query { packet.extract(hdr.dns_query); transition accept; }
    state parse_int {
        packet.extract(hdr.int_shim);
        packet.extract(hdr.int_switch_id);
        packet.extract(hdr.int_hop_latency);
        transition accept;
    }
}
