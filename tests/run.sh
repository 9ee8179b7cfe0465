#!/usr/bin/env bash
# The whole test suite: sets up .venv on first use, then runs pytest on both cores.
# Tests that need p4c, simple_switch_grpc, Mininet or the Tofino SDE skip with the reason.
source "$(dirname "$0")/../.ci/venv.sh"
exec python -m pytest -n 2 --dist loadfile -q "$@"
