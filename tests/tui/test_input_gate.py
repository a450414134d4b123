"""The preview's worker waits while a key is handled (`sessiontree.tui.input_gate`): threads
share Python's interpreter lock, and a render running beside a key's handler halves its speed."""

from __future__ import annotations

import shutil
import threading
import time

from harness.pilot import make_app, settle
from helpers import PI_FIXTURES, A, U
from sessiontree import JsonlStorage, Session
from sessiontree.tui import input_gate
from sessiontree.tui.input_gate import InputGate, gated
from sessiontree.tui.preview_pane import PreviewPane
from sessiontree.tui.tree_view import SessionTreeView


def test_the_gate_opens_when_the_last_overlapping_input_is_done(monkeypatch):
    gate = InputGate()
    assert gate.is_open
    gate.close()
    gate.close()  # a second key before the first one's frame
    gate.release()
    assert not gate.is_open
    gate.release()
    assert gate.is_open
    gate.release()  # one more release than closes (a callback after the app reset) stays open
    gate.close()
    assert not gate.is_open
    monkeypatch.setattr(input_gate, "WAIT_MOST", 0.05)
    started = time.perf_counter()
    gate.wait()  # closed: a worker waits, but not for ever...
    assert 0.04 < time.perf_counter() - started < 1
    assert gate.is_open  # ...and a gate stuck closed is opened
    gate.close()
    opened = threading.Timer(0.02, gate.release)
    opened.start()
    monkeypatch.setattr(input_gate, "WAIT_MOST", 5.0)
    started = time.perf_counter()
    gate.wait()  # ...and goes on as soon as it opens
    assert time.perf_counter() - started < 2


def test_a_worker_that_waited_leaves_the_frame_time_to_be_written(monkeypatch):
    # The gate opens once the frame is drawn; Textual's writer thread has yet to write it out.
    monkeypatch.setattr(input_gate, "AFTER_FRAME", 0.3)
    gate = InputGate()
    started = time.perf_counter()
    gate.wait()  # open: nothing to leave time for
    assert time.perf_counter() - started < 0.2
    gate.close()
    threading.Timer(0.02, gate.release).start()
    started = time.perf_counter()
    gate.wait()
    assert time.perf_counter() - started >= 0.3


async def test_a_key_closes_the_gate_until_its_frame_and_the_preview_waits_for_it(tmp_path):
    path = tmp_path / "long.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        for k in range(60):
            s.append_message(U(f"question {k}"))
            s.append_message(A(f"answer {k}\n\n" + "Some **bold** words and `code`. " * 40))
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        tree = app.browser.query_one(SessionTreeView)
        pane = app.browser.query_one(PreviewPane)
        seen: list[bool] = []
        real = tree.action_cursor

        def cursor(step: int) -> None:
            seen.append(app.input_gate.is_open)
            real(step)

        tree.action_cursor = cursor  # type: ignore[method-assign]
        await pilot.press("up")
        assert seen == [False]  # closed while the key's handler runs...
        await pilot.pause()
        assert app.input_gate.is_open  # ...open once its frame is drawn
        await settle(app, pilot)
        assert "first" in pane.timings

        planned: list[str] = []
        plan = pane._plan

        def planning(request):  # type: ignore[no-untyped-def]
            planned.append(request.target.entry_id)
            return plan(request)

        pane._plan = planning  # type: ignore[method-assign]
        app.input_gate.close()  # as if a key were being handled: the worker must not even plan
        tree.set_cursor(tree.cursor_row - 4)
        await pilot.pause(0.4)  # well past the debounce and a render's first screen
        assert "start" in pane.timings and "first" not in pane.timings
        assert planned == []  # a context walk would share the interpreter lock with the key
        app.input_gate.release()
        await settle(app, pilot)
        assert "first" in pane.timings and "done" in pane.timings
        assert planned == [tree.current_target().entry_id]


def test_a_gated_check_waits_while_an_input_is_handled_then_asks_the_worker():
    class App:
        input_gate = InputGate()

    answers = iter([False, True])
    check = gated(App(), lambda: next(answers))
    App.input_gate.close()
    threading.Timer(0.1, App.input_gate.release).start()
    started = time.perf_counter()
    assert check() is False  # waited for the release, then asked
    assert time.perf_counter() - started >= 0.09
    assert check() is True
    plain = lambda: False  # noqa: E731
    assert gated(object(), plain) is plain  # an app without a gate: nothing to wait for


async def test_a_search_waits_while_a_key_is_handled(tmp_path, monkeypatch):
    monkeypatch.setattr(input_gate, "WAIT_MOST", 30.0)  # a slow machine must not open it
    path = tmp_path / "large-session.jsonl"
    shutil.copyfile(PI_FIXTURES / "large-session.jsonl", path)
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("slash", *"thinkingMedium cyan")
        app.input_gate.close()  # as if a key were being handled when the search starts
        await pilot.press("enter")
        await pilot.pause(0.4)
        assert not app.browser._matches  # the scan waits at its first block
        app.input_gate.release()
        await settle(app, pilot)
        assert app.browser._matches
