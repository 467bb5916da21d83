"""The compiled block index (_neardup.pyx) against its reference (`NearDupIndexReference`,
pure Python): the same answer to every lookup, for every distance; and built where `pip
install -e .` (as scripts/setup.sh runs it) builds it, so that a silent fallback to the
reference fails here."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from gossamer import neardup
from gossamer.neardup import NearDupIndexReference
from gossamer.parse.simhash import hamming


def _compiled() -> type:
    from gossamer._neardup import NearDupIndex

    return NearDupIndex


def test_the_compiled_index_is_built_and_used() -> None:
    """Fails in a checkout whose `pip install -e .` did not build _neardup.pyx (or built it
    before the .pyx last changed): run it again (./scripts/setup.sh)."""
    compiled = _compiled()
    assert neardup.NearDupIndex is compiled
    assert type(neardup.NearDups(None).index) is compiled
    import gossamer._neardup as module

    built = Path(module.__file__)  # type: ignore[arg-type]
    source = built.with_name("_neardup.pyx")
    if source.exists():  # an editable install: the module is built from this .pyx
        assert built.stat().st_mtime >= source.stat().st_mtime, "stale: pip install -e ."


@pytest.mark.parametrize("distance", range(8))
def test_every_lookup_answers_as_the_reference(distance: int) -> None:
    """Pages added one by one, each looked up first (as NearDups.match does): random ones, and
    near copies of earlier ones at 0 to distance + 2 bits (within and just past the distance;
    several within it: the first added is the answer). Blocks of 8 bits (k = 7) to 64 (k = 0),
    whose values the compiled tables mix into 16 bits."""
    rng = random.Random(distance)
    compiled, reference = _compiled()(distance), NearDupIndexReference(distance)
    assert compiled.distance == distance
    fps: list[int] = []
    found = 0
    for k in range(4000):
        if fps and rng.random() < 0.6:
            fp = rng.choice(fps)
            for bit in rng.sample(range(64), rng.randrange(0, distance + 3)):
                fp ^= 1 << bit
        else:
            fp = rng.getrandbits(64)
        want = reference.find(fp)
        assert compiled.find(fp) == want, (k, fp)
        found += want is not None
        if want is None or rng.random() < 0.3:  # duplicates are added too, sometimes
            compiled.add(fp, f"u{k}")
            reference.add(fp, f"u{k}")
            fps.append(fp)
        assert len(compiled) == len(reference)
    assert found > 700
    # the extremes of the 64 bits
    for fp in (0, (1 << 64) - 1, 1 << 63, 0xFFFF, 0xFFFF << 48):
        assert compiled.find(fp) == reference.find(fp)


def test_a_scan_agrees() -> None:
    rng = random.Random(3)
    index = _compiled()(3)
    fps = [rng.getrandbits(64) for _ in range(2000)]
    for k, fp in enumerate(fps):
        index.add(fp, f"u{k}")
    for _ in range(200):
        probe = rng.choice(fps)
        for bit in rng.sample(range(64), rng.randrange(0, 6)):
            probe ^= 1 << bit
        scan = next((f"u{k}" for k, fp in enumerate(fps) if hamming(fp, probe) <= 3), None)
        assert index.find(probe) == scan


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"0\.\.7 bits"):
        _compiled()(8)
    index = _compiled()(3)
    with pytest.raises(OverflowError):
        index.add(1 << 64, "u")
    with pytest.raises(TypeError):
        index.add(1, None)
    assert len(index) == 0
