"""Traces at URLs (apps.storage): file:// goes through pyarrow.fs like hdfs:// and s3a:// do, so it
stands in for them here; bad URLs are user errors naming the URL, never tracebacks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from apps import storage
from apps.pcap import PcapReader, pcap_record_offsets, split_pcap, write_pcap
from compiler.base.errors import P4subError

pytest.importorskip("pyarrow.fs", reason="pyarrow is a dependency of p4sub")


def capture(path: Path, n: int = 300) -> Path:
    rng = np.random.default_rng(5)
    write_pcap(path, [(1_000 + i, bytes(rng.integers(0, 256, int(rng.integers(20, 200)), dtype=np.uint8)))
                      for i in range(n)])
    return path


def test_a_file_url_reads_the_same_records_and_ranges_as_the_path(tmp_path) -> None:
    path = capture(tmp_path / "t.pcap")
    url = path.resolve().as_uri()
    assert url.startswith("file:///") and storage.is_url(url) and not storage.is_url(str(path))
    assert storage.file_size(url) == storage.file_size(path) == path.stat().st_size
    with PcapReader(path, chunk_bytes=1 << 12) as local, PcapReader(url, chunk_bytes=1 << 12) as remote:
        assert list(remote) == list(local)
    assert np.array_equal(pcap_record_offsets(url), pcap_record_offsets(path))
    for a, b in zip(split_pcap(path, 4), split_pcap(url, 4)):
        with PcapReader(path, byte_range=a) as ra, PcapReader(url, byte_range=b) as rb:
            assert list(ra) == list(rb)


def test_absolute_keeps_urls_and_anchors_local_paths(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert storage.absolute("feed.pcap") == str(tmp_path / "feed.pcap")
    assert storage.absolute("s3a://bucket/feed.pcap") == "s3a://bucket/feed.pcap"


@pytest.mark.parametrize("url, words", [
    ("file:///nonexistent-p4sub/feed.pcap", "no such trace file"),
    ("/nonexistent-p4sub/feed.pcap", "no such trace file"),
    ("gs://bucket/feed.pcap", "cannot read gs:// URLs"),
    ("ftp://host/feed.pcap", "cannot read ftp:// URLs"),
])
def test_missing_files_and_unknown_schemes_are_user_errors(url: str, words: str) -> None:
    with pytest.raises(P4subError, match=words) as err:
        storage.file_size(url)
    assert str(err.value).startswith(url)
    if storage.is_url(url):
        with pytest.raises(P4subError, match=url.split("://")[0]):
            PcapReader(url)


def test_a_directory_is_not_a_trace(tmp_path) -> None:
    with pytest.raises(P4subError, match="directory"):
        storage.file_size(tmp_path.as_uri())


def test_an_unreachable_hdfs_is_a_user_error_with_what_it_needs() -> None:
    # Without libhdfs (no Hadoop here or in CI) pyarrow fails at once; with it, port 1 refuses.
    with pytest.raises(P4subError, match=r"^hdfs://127\.0\.0\.1:1/feed\.pcap: .*libhdfs"):
        storage.file_size("hdfs://127.0.0.1:1/feed.pcap")


def test_cli_replay_of_a_missing_url_exits_2_before_spark_starts(tmp_path, capsys) -> None:
    from p4sub import main

    repo = Path(__file__).resolve().parents[2]
    rules = tmp_path / "r.sub"
    rules.write_text('add_order.stock == "AAPL" : fwd(1);\n')
    assert main(["compile", str(repo / "apps/itch/itch.p4"), str(rules), "-o", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    status = main(["replay", str(tmp_path / "out"), "--rules", str(rules), "--trace", "file:///nonexistent-p4sub/f.pcap",
                   "--master", "spark://127.0.0.1:1"])
    err = capsys.readouterr().err
    assert status == 2 and "file:///nonexistent-p4sub/f.pcap: no such trace file" in err and "Traceback" not in err
