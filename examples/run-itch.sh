#!/usr/bin/env bash
# The main job on the embedded defaults: compile the ITCH example for BMv2, prove the pipeline equal
# to the rules, generate an ITCH 5.0 feed (MoldUDP64 over UDP in pcap), and replay it on Spark in
# local mode, printing throughput and the deliveries and false positives per subscriber port.
# Sets up .venv on first use.
# Knobs: OUT (output directory, default out/itch), MESSAGES (feed size, default 1000000).
# OUT holds the compiled pipeline (OUT/pipeline, a directory p4sub replaces whole on a re-run), the feed
# (OUT/feed.pcap) and the replay's report (OUT/report), side by side.
source "$(dirname "$0")/../.ci/venv.sh"
out="${OUT:-out/itch}"
messages="${MESSAGES:-1000000}"
mkdir -p "$out"
set -x
p4sub check apps/itch/itch.p4 apps/itch/rules.sub
p4sub compile apps/itch/itch.p4 apps/itch/rules.sub --target bmv2 -o "$out/pipeline"
p4sub verify "$out/pipeline"
p4sub gen itch --messages "$messages" --symbols 100 --zipf 1.1 --batch 1-12 --seed 1 -o "$out/feed.pcap"
p4sub replay "$out/pipeline" --trace "$out/feed.pcap" --report "$out/report"
