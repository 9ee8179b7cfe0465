/* hICN (hybrid Information-Centric Networking) Interests, as p4sub reads them.
 *
 * hICN names content with IPv6 addresses: an Interest asks for the content named by its IPv6
 * destination address (the name prefix), the segment in the transport header's name suffix (the
 * TCP sequence number's place). A Data packet carries the name in its source address. Camus's hICN
 * application (p4pubsub/hicn) forwards Interests on the name and, with a meter, sends an Interest
 * to the cache only while its content is hot; here the heat is a counter per name: Interests for
 * the content in the last second (docs/compiler.md, "Stateful subscriptions").
 */
#include <core.p4>

const bit<16> TYPE_IPV6 = 0x86dd;
const bit<8> PROTO_HICN = 6;     // hICN's transport header has the TCP header's shape and number

header ethernet_t { bit<48> dst_addr; bit<48> src_addr; bit<16> ether_type; }
header ipv6_t {
    bit<4> version; bit<8> traffic_class; bit<20> flow_label;
    bit<16> payload_len; bit<8> next_hdr; bit<8> hop_limit;
    bit<128> src_addr; bit<128> dst_addr;
}
header hicn_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> name_suffix;         // the segment of the content
    bit<32> path_label;
    bit<4> data_offset;
    bit<4> reserved;
    bit<8> flags;
    bit<16> lifetime;            // Interest lifetime, ms
    bit<16> checksum;
    bit<16> urgent;
}

@query_field_lpm(ipv6.dst_addr)
@query_field_exact(hicn.name_suffix)
@query_field_exact(standard_metadata.ingress_port)
@query_counter(interests, 1000000, 4096, key=ipv6.dst_addr)   // Interests per content per second

struct headers { ethernet_t ethernet; ipv6_t ipv6; hicn_t hicn; }
struct metadata { }

parser HicnParser(packet_in packet, out headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { TYPE_IPV6: parse_ipv6; default: accept; }
    }
    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        transition select(hdr.ipv6.next_hdr) { PROTO_HICN: parse_hicn; default: accept; }
    }
    state parse_hicn {
        packet.extract(hdr.hicn);
        transition accept;
    }
}
