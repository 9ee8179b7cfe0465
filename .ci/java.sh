# Sourced by .ci/run: Spark (the replay tests and the standalone-cluster test) needs Java 17.
# Nothing happens when java already runs; otherwise Debian's default JRE is installed (about a minute).
if ! java -version >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "CI: no Java; installing default-jre-headless for Spark" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends default-jre-headless >/dev/null
  else
    echo "CI: no Java and no root apt-get to install it; the Spark tests will fail (P4SUB_REQUIRE_SPARK)" >&2
  fi
fi
# In CI the Spark tests must run: a missing Java is a failure there, not a skip.
export P4SUB_REQUIRE_SPARK=1
