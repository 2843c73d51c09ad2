"""gcpause: automatic garbage collection stays off while any pause lasts, and comes back as it was."""

from __future__ import annotations

import gc
import threading

import pytest

from gpufleet import gcpause


@pytest.fixture(autouse=True)
def _collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_a_pause_turns_automatic_collection_off_and_back_on():
    with gcpause.paused():
        assert not gc.isenabled()
        with gcpause.paused():  # nested: still off after the inner one ends
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_back_on_after_an_exception():
    with pytest.raises(RuntimeError), gcpause.paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_process_that_turned_it_off_keeps_it_off():
    gc.disable()
    with gcpause.paused():
        pass
    assert not gc.isenabled()


def test_overlapping_pauses_of_two_threads_end_with_the_last():
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first() -> None:
        with gcpause.paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with gcpause.paused():
            second_in.set()
            first_out.wait(5)
            seen["after the first ended"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"after the first ended": False}
    assert gc.isenabled()
