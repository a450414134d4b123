"""Full garbage-collection passes run between keys, not in the middle of them."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import pytest

from harness.pilot import make_app, settle
from sessiontree.tui import collector
from sessiontree.tui.collector import DUE_AFTER, IdleCollector


@pytest.fixture
def full_passes() -> Iterator[list[float]]:
    """When each full pass (generation 2) started, from Python's own callbacks."""
    started: list[float] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            started.append(time.monotonic())

    gc.callbacks.append(seen)
    try:
        yield started
    finally:
        gc.callbacks.remove(seen)


def young_passes_pile_up() -> None:
    """As many young passes as make a full one due (each counts one towards it)."""
    for _ in range(DUE_AFTER):
        gc.collect(1)
    assert gc.get_count()[2] >= DUE_AFTER


def test_a_pass_waits_for_quiet_input_and_then_runs_once(monkeypatch, full_passes):
    monkeypatch.setattr(collector, "QUIET", 0.2)
    monkeypatch.setattr(collector, "MIN_GAP", 0.0)
    idle = IdleCollector()
    young_passes_pile_up()
    idle.touched()
    assert not idle.tick() and not full_passes  # a key just now
    idle.last_input -= 0.3
    assert idle.tick() and len(full_passes) == 1
    assert gc.get_count()[2] == 0
    assert not idle.tick()  # nothing piled up since


def test_no_pass_while_young_passes_are_few_or_the_collector_is_off(monkeypatch, full_passes):
    monkeypatch.setattr(collector, "QUIET", 0.0)
    monkeypatch.setattr(collector, "MIN_GAP", 0.0)
    idle = IdleCollector()
    gc.collect()  # the count of young passes starts from zero
    assert not idle.tick()
    young_passes_pile_up()
    gc.disable()  # what Textual does during a smooth scroll
    try:
        assert not idle.tick()
    finally:
        gc.enable()
    assert idle.tick()


def test_passes_are_kept_apart(monkeypatch):
    monkeypatch.setattr(collector, "QUIET", 0.0)
    monkeypatch.setattr(collector, "MIN_GAP", 60.0)
    idle = IdleCollector()
    idle.last_pass -= 61
    young_passes_pile_up()
    assert idle.tick()
    young_passes_pile_up()
    assert not idle.tick()  # the last was just now: an app following a live agent stays idle


async def test_the_app_collects_after_keys_stop_never_between_them(demo, monkeypatch, full_passes):
    monkeypatch.setattr(collector, "QUIET", 0.8)  # keys below come every ~0.1 s, even on a busy machine
    monkeypatch.setattr(collector, "MIN_GAP", 0.0)
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        young_passes_pile_up()
        full_passes.clear()
        typing_until = time.monotonic() + 1.6  # two quiet periods' worth of keys
        while time.monotonic() < typing_until:
            await pilot.press("j")
            await pilot.pause(0.05)
        assert app.collector.passes == 0  # Python's own passes may run meanwhile, as before
        ran = len(full_passes)
        young_passes_pile_up()
        await pilot.pause(1.5)  # quiet: the app's timer finds a pass due
        assert app.collector.passes == 1
        assert len(full_passes) > ran
        assert min(full_passes[ran:]) >= typing_until


def test_collections_are_held_while_an_input_is_handled():
    idle = IdleCollector()
    assert gc.isenabled()
    try:
        idle.hold()
        assert not gc.isenabled()
        idle.resume(animating=True)  # a smooth scroll holds them too: Textual turns them on after
        assert not gc.isenabled()
        idle.resume()
        assert gc.isenabled()
        gc.disable()  # off already (a smooth scroll): holding and resuming leave it to Textual
        idle.hold()
        idle.resume()
        assert not gc.isenabled()
    finally:
        gc.enable()


async def test_no_collection_runs_in_a_keys_handling(demo):
    # Opening a dialog allocates enough to start a full pass in the middle of it (`?` took 54
    # ms to its frame on the demo with one, 35 ms without).
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        from sessiontree.tui.tree_view import SessionTreeView

        tree = app.browser.query_one(SessionTreeView)
        seen: list[bool] = []
        real = tree.action_cursor

        def cursor(step: int) -> None:
            seen.append(gc.isenabled())
            real(step)

        tree.action_cursor = cursor
        await pilot.press("j", "k")
        await settle(app, pilot)
        await pilot.pause(0.1)
        assert seen == [False, False]
        assert gc.isenabled()  # on again once the frames are out
    assert gc.isenabled()
