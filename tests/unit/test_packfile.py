"""Pack files: named arrays written atomically, read whole (checked) or mapped privately."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from synapsedb.index import packfile
from synapsedb.index.packfile import MAGIC, Pack, PackError, write_pack


def _sections() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        "ids": np.arange(1000, dtype=np.int64),
        "flags": (rng.random(1000) < 0.5),
        "text": np.frombuffer("naïve — text".encode(), np.uint8),
        "empty": np.zeros((0, 4), np.float32),
        "vectors": rng.standard_normal((1000, 8)).astype(np.float32),
    }


def test_sections_come_back_exactly_with_the_meta(tmp_path: Path) -> None:
    path = tmp_path / "ns.pack"
    secs = _sections()
    write_pack(path, {"rows": 1000, "name": "ns"}, secs)
    assert not (tmp_path / "ns.pack.tmp").exists()
    assert os.stat(path).st_mode & 0o777 == 0o600
    with Pack(path) as pack:
        assert pack.meta == {"rows": 1000, "name": "ns"}
        for name, arr in secs.items():
            got = pack.array(name)
            assert got.dtype == arr.dtype and got.shape == arr.shape
            assert np.array_equal(got, arr)
            got[...] = 0  # a fresh, writable copy: the file is unchanged
        assert np.array_equal(pack.array("ids"), secs["ids"])
        assert pack.blob("text").decode() == "naïve — text"
        for spec in pack.sections.values():
            assert spec["offset"] % 64 == 0


def test_a_section_written_in_chunks_equals_one_written_whole(tmp_path: Path) -> None:
    vecs = _sections()["vectors"]
    parts = [vecs[:300], vecs[300:301].tobytes(), vecs[301:]]
    write_pack(tmp_path / "a", {}, {"v": vecs})
    write_pack(tmp_path / "b", {}, {"v": ("<f4", vecs.shape, parts)})
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
    with pytest.raises(ValueError, match="declared"):
        write_pack(tmp_path / "c", {}, {"v": ("<f4", (1001, 8), parts)})
    assert not (tmp_path / "c").exists() and not (tmp_path / "c.tmp").exists()


def test_a_torn_foreign_or_damaged_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packfile, "SAMPLE", 256)  # mapped sections check 256-byte ends
    path = tmp_path / "ns.pack"
    write_pack(path, {}, _sections())
    good = path.read_bytes()
    with pytest.raises(PackError, match=r"(?i)no such file"):
        Pack(tmp_path / "missing")
    path.write_bytes(b"not a pack at all")
    with pytest.raises(PackError, match="not a pack"):
        Pack(path)
    path.write_bytes(good[: len(good) // 2])  # torn: the last sections are past the end
    with pytest.raises(PackError, match="past the end"):
        Pack(path)
    path.write_bytes(MAGIC + (10**9).to_bytes(8, "little") + good[16:])
    with pytest.raises(PackError, match="torn header"):
        Pack(path)
    with Pack(_write(tmp_path, good)) as pack:
        vec = pack.sections["vectors"]
        ids = pack.sections["ids"]
    for offset, name in (
        (ids["offset"] + 9, "ids"),
        (vec["offset"] + 3, "vectors"),
        (vec["offset"] + vec["nbytes"] - 3, "vectors"),
    ):
        bad = bytearray(good)
        bad[offset] ^= 0xFF
        path.write_bytes(bytes(bad))
        with Pack(path) as pack, pytest.raises(PackError, match="checksum"):
            pack.array(name)
        if name == "vectors":  # a flipped byte in its first or last 256 bytes
            with Pack(path) as pack, pytest.raises(PackError, match="checksum"):
                pack.mapped(name)


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "copy.pack"
    path.write_bytes(data)
    return path


def test_a_mapped_section_reads_the_file_and_writes_only_private_pages(tmp_path: Path) -> None:
    path = tmp_path / "ns.pack"
    vecs = _sections()["vectors"]
    write_pack(path, {}, {"ids": np.arange(3), "vectors": vecs}, spare_bytes=4096)
    before = path.read_bytes()
    with Pack(path) as pack:
        rows = pack.mapped("vectors", capacity=1200)
    arr = rows.array
    assert arr.shape == (1200, 8) and np.array_equal(arr[:1000], vecs)
    assert not arr[1000:].any()  # room past the section reads as zeros
    arr[1000:1010] = 7.0  # rows added after the open: private pages
    arr[5] = -1.0  # even a row of the file: a private copy, the file is not written
    grown = rows.grow(5000, used=1010)
    assert grown.shape == (5000, 8) and rows.capacity == 5000
    assert np.array_equal(grown[:5], vecs[:5]) and np.array_equal(grown[6:1000], vecs[6:1000])
    assert (grown[1000:1010] == 7.0).all() and not grown[1010:].any()
    assert rows.grow(100, used=1010) is grown  # room enough: the same mapping
    rows.close()
    after = path.read_bytes()
    assert after[: len(before)] == before  # every byte of the sections as written
    assert not after[len(before) :].strip(b"\0")  # the file only gained a hole
    with Pack(path) as pack:
        assert np.array_equal(pack.array("vectors"), vecs)


def test_a_replaced_file_is_left_unchanged_by_an_open_pack(tmp_path: Path) -> None:
    """A reader that opened the old file keeps reading the old file after a writer replaced
    it (rename), and refuses to map what it did not read."""
    path = tmp_path / "ns.pack"
    write_pack(path, {"v": 1}, {"vectors": np.ones((4, 2), np.float32)})
    pack = Pack(path)
    write_pack(path, {"v": 2}, {"vectors": np.zeros((4, 2), np.float32)})
    assert pack.meta == {"v": 1} and pack.array("vectors").all()
    with pytest.raises(PackError, match="replaced"):
        pack.mapped("vectors")
    pack.close()
    with Pack(path) as again:
        assert again.meta == {"v": 2}
