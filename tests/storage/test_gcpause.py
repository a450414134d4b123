"""The collector's pause around bulk decoding (`storage/gcpause.py`)."""

from __future__ import annotations

import gc

from sessiontree.storage.gcpause import paused_gc


def decode_many() -> list[dict[str, list[int]]]:
    return [{"content": [k]} for k in range(20_000)]


def test_what_was_decoded_meanwhile_goes_to_the_oldest_generation_unscanned():
    gc.unfreeze()  # what an app run earlier in this process froze (the browser does)
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        kept = decode_many()
    assert gc.isenabled()
    # No young pass is due (it would walk all 40,000 containers), and they wait for a full one.
    assert gc.get_count()[0] < gc.get_threshold()[0]
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert id(kept) in oldest and id(kept[-1]) in oldest


def test_objects_frozen_by_someone_else_stay_frozen():
    mine = [{"frozen": [1]}]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with paused_gc():
            kept = decode_many()
        assert gc.isenabled() and gc.get_freeze_count() == frozen
        assert id(kept) not in {id(o) for o in gc.get_objects(generation=2)}
        assert mine
    finally:
        gc.unfreeze()


def test_a_collector_turned_off_stays_off():
    gc.disable()
    try:
        with paused_gc(), paused_gc():  # nested, as a scan inside a load can be
            decode_many()
        assert not gc.isenabled()
    finally:
        gc.enable()
