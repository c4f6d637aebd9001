"""The monitor: a listener failing in open or sample is reported and closed while the others go on; the
last reading at stop is taken so counters cover the whole run, never a repeat of the reading just taken
(the same millisecond, which MLflow would store once and psutil would read as 0 %); a counter read only
now and then gets its closing reading at stop, after the last sample."""
import threading
import time

from listeners.base import Listener, Reading, Target
from radt_ext.sampling.monitor import Monitor


class Clock(Listener):
    """A listener of the process's own CPU time: real values, one per sample."""
    name = "clock"

    def __init__(self, interval, on_sample=None):
        super().__init__(Target(), interval)
        self.on_sample = on_sample

    def read(self):
        if self.on_sample:
            self.on_sample()
        return {"cpu_s": time.process_time()}


def _run(listener, final_gap, seconds):
    readings = []
    monitor = Monitor([listener], lambda name, r: readings.append(r), final_gap=final_gap)
    listener.monitor = monitor
    monitor.start()
    time.sleep(seconds)
    monitor.stop()
    return readings


def test_a_last_reading_is_taken_at_stop():
    readings = _run(Clock(interval=30), final_gap=0.02, seconds=0.3)
    assert len(readings) == 2  # the loop's first, then the one at stop, 0.3 s later
    assert readings[1].time - readings[0].time >= 0.25


def test_no_last_reading_right_after_one():
    listener = Clock(interval=30)
    listener.on_sample = lambda: listener.monitor._stop.set()  # stop arrives as the first sample is read
    readings = _run(listener, final_gap=5.0, seconds=0.3)
    assert len(readings) == 1


class Counter(Clock):
    """A counter read rarely: its closing reading comes at stop, after the last sample, before close()."""
    name = "counter"

    def __init__(self, interval):
        super().__init__(interval)
        self.events = []

    def closing_sample(self):
        self.events.append("closing")
        return [Reading(time.time(), {"total_j": time.process_time()})]

    def close(self):
        self.events.append("close")


def test_the_closing_reading_comes_last_even_right_after_a_sample():
    listener = Counter(interval=30)
    listener.on_sample = lambda: listener.monitor._stop.set()  # stop arrives as the first sample is read
    readings = _run(listener, final_gap=5.0, seconds=0.3)
    assert [list(r.values) for r in readings] == [["cpu_s"], ["total_j"]]  # no repeat, but the counter
    assert listener.events == ["closing", "close"]


def test_a_listener_without_a_closing_reading_gets_none():
    readings = _run(Clock(interval=30), final_gap=0.02, seconds=0.3)
    assert all(list(r.values) == ["cpu_s"] for r in readings)


class Stuck(Listener):
    """A listener whose second read blocks until released: a driver call that hangs past stop."""
    name = "stuck"

    def __init__(self):
        super().__init__(Target(), 0.01)
        self.reads = 0
        self.entered = threading.Event()
        self.release = threading.Event()

    def read(self):
        self.reads += 1
        if self.reads == 2:
            self.entered.set()
            self.release.wait()
        return {"x_w": float(self.reads)}


def test_a_reading_that_returns_after_stop_gave_up_on_it_is_not_lost_silently(tracking_uri):
    from mlflow.tracking import MlflowClient

    from radt_ext.store.writer import MetricWriter

    client = MlflowClient(tracking_uri)
    run_id = client.create_run("0").info.run_id
    writer = MetricWriter(client, run_id, tracking_uri, flush_interval=0.05).start()
    listener = Stuck()
    monitor = Monitor([listener], lambda name, r: writer.add("system/x_w", r.values["x_w"], int(r.time * 1000),
                                                             listener.reads))
    monitor.start()
    assert listener.entered.wait(30)
    monitor.stop(timeout=0.1)  # gives up on the hung thread
    writer.close()
    listener.release.set()  # the hung call returns after the run's end
    for thread in monitor._threads:
        thread.join()
    stored = len(client.get_metric_history(run_id, "system/x_w"))
    assert writer.sent == writer.stored + writer.spooled + writer.lost == stored


class Broken(Listener):
    """A listener that breaks its contract: its open fails half-way, or it reads a value that is no number."""
    name = "broken"

    def __init__(self, fail_open=False):
        super().__init__(Target(), 0.01)
        self.fail_open = fail_open
        self.closed = False
        self.reads = 0

    def open(self):
        if self.fail_open:
            raise RuntimeError("device went away")

    def read(self):
        self.reads += 1
        return {"ok_w": 1.0, "bad_w": "n/a"} if self.reads >= 3 else {"ok_w": 1.0}

    def close(self):
        self.closed = True


def test_a_listener_whose_open_fails_is_closed_and_reported():
    listener = Broken(fail_open=True)
    monitor = Monitor([listener], lambda name, r: None)
    monitor.start()
    monitor.stop()
    assert listener.closed
    assert monitor.errors == {"broken": "open: RuntimeError: device went away"}


def test_a_value_that_is_no_number_is_the_listeners_failure_and_others_go_on(tracking_uri):
    from mlflow.tracking import MlflowClient

    from radt_ext.sampling.recorder import Recorder

    client = MlflowClient(tracking_uri)
    run_id = client.create_run("0").info.run_id
    broken, clock = Broken(), Clock(interval=0.01)
    recorder = Recorder(client, run_id, tracking_uri, [broken, clock]).start()
    time.sleep(0.5)
    recorder.stop()
    assert recorder.monitor.errors["broken"].startswith("sample: ValueError")
    assert broken.closed
    stored_ok = client.get_metric_history(run_id, "system/ok_w")
    assert len(stored_ok) >= 2  # the readings before the bad one are kept
    assert client.get_metric_history(run_id, "system/bad_w") == []  # nothing unusable reached the store
    assert recorder.summaries.stat("cpu_s").count > 5  # the other listener went on
    assert client.get_metric_history(run_id, "system/cpu_s")  # and reached the store
    assert recorder.writer.lost == 0


class SlowOpen(Clock):
    """A listener whose open takes a while (nvidia-smi's first line): the others are sampled meanwhile."""
    name = "slow"

    def __init__(self, interval, seconds):
        super().__init__(interval)
        self.seconds = seconds
        self.opened_at = None

    def open(self):
        time.sleep(self.seconds)
        self.opened_at = time.time()


def test_listeners_open_side_by_side_and_each_is_sampled_once_open():
    slow, fast = SlowOpen(interval=0.05, seconds=1.0), Clock(interval=0.05)
    fast.name = "fast"
    readings = []
    monitor = Monitor([slow, fast], lambda name, r: readings.append((name, r.time)))
    started = time.time()
    monitor.start()
    time.sleep(1.5)
    monitor.stop()
    fast_times = [t for name, t in readings if name == "fast"]
    slow_times = [t for name, t in readings if name == "slow"]
    assert fast_times and fast_times[0] - started < 0.5  # not held back by the slow open
    assert slow_times and slow_times[0] >= slow.opened_at
    assert len({name for name, _ in readings}) == 2


def test_a_listener_still_opening_at_stop_is_closed_once_open():
    slow = Counter(interval=0.05)
    slow.open = lambda: time.sleep(0.5)
    monitor = Monitor([slow], lambda name, r: None)
    monitor.start()
    time.sleep(0.1)
    monitor.stop()
    assert slow.events == ["closing", "close"]


def test_doorbell_keeps_a_ring_until_heard_and_otherwise_waits_its_timeout():
    from radt_ext.sampling.monitor import Doorbell

    bell = Doorbell()
    bell.ring()
    bell.ring()  # a second ring before anyone listened is the same ring
    t = time.monotonic()
    bell.wait(5.0)  # heard at once
    assert time.monotonic() - t < 2.0
    t = time.monotonic()
    bell.wait(0.2)  # nothing rang since: the whole timeout
    assert time.monotonic() - t >= 0.19
    threading.Timer(0.1, bell.ring).start()
    t = time.monotonic()
    bell.wait(None)  # no timeout: until rung from another thread
    assert time.monotonic() - t >= 0.05


class SlowClose(Clock):
    """A listener whose close takes a while (a tool's process that exits slowly): when it ran is kept."""

    def __init__(self, name, seconds):
        super().__init__(interval=0.05)
        self.name, self.seconds, self.closed_span = name, seconds, None

    def close(self):
        began = time.monotonic()
        time.sleep(self.seconds)
        self.closed_span = (began, time.monotonic())


def test_listeners_close_side_by_side_so_the_end_waits_for_the_slowest_not_the_sum():
    a, b = SlowClose("a", 0.4), SlowClose("b", 0.4)
    readings = []
    monitor = Monitor([a, b], lambda name, r: readings.append(name))
    monitor.start()
    time.sleep(0.2)
    monitor.stop()
    (a0, a1), (b0, b1) = a.closed_span, b.closed_span
    assert a0 < b1 and b0 < a1  # the two closes overlapped
    assert readings.count("a") >= 2 and readings.count("b") >= 2  # each still got its last reading


def test_with_defer_close_stop_returns_after_the_last_readings_and_the_closes_finish_on_their_own():
    a, b = SlowClose("a", 0.4), SlowClose("b", 0.4)
    readings = []
    monitor = Monitor([a, b], lambda name, r: readings.append(name))
    monitor.start()
    time.sleep(0.2)
    monitor.stop(defer_close=True)
    taken = len(readings)
    assert a.closed_span is None and b.closed_span is None  # still closing
    assert readings.count("a") >= 2 and readings.count("b") >= 2  # the last readings are in before stop returns
    monitor.wait_closed()
    assert a.closed_span is not None and b.closed_span is not None
    assert len(readings) == taken  # closing adds no reading after stop
