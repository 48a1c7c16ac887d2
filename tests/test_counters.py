"""pytest_cudagraph.caches.counters: snapshots and deltas of torch's compile-cache counters."""

from __future__ import annotations

from pytest_cudagraph.caches.counters import (
    CounterSnapshot,
    active_triton_cache_dirs,
    counter_delta,
    counter_snapshot,
    delta_between,
    triton_compiled_and_loaded,
    triton_kernel_dirs,
)


def test_delta_maps_counters_to_report_layers():
    before = CounterSnapshot({("inductor", "fxgraph_cache_miss"): 3, ("aot_autograd", "autograd_cache_saved"): 1})
    after = CounterSnapshot(
        {
            ("inductor", "fxgraph_cache_miss"): 5,
            ("inductor", "fxgraph_cache_hit"): 2,
            ("aot_autograd", "autograd_cache_saved"): 1,
        }
    )
    delta = delta_between(before, after)
    assert delta.fxgraph == {"hit": 2, "miss": 2, "bypass": 0}
    assert delta.aot_autograd["saved"] == 0
    assert delta.any
    assert set(delta.to_json()) == {"fxgraph", "aot_autograd", "triton"}


def test_no_counter_moved_gives_no_delta():
    assert counter_delta(counter_snapshot()) is None


def test_kernel_dirs_in_both_triton_layouts(tmp_path):
    def kernel(path, name):
        path.mkdir(parents=True)
        (path / f"__grp__{name}.json").write_text("{}")
        (path / f"{name}.cubin").write_bytes(b"")

    flat = tmp_path / "flat"
    kernel(flat / "KERNELHASHA", "triton_poi_fused_sin_0")
    kernel(flat / "KERNELHASHB", "triton_red_fused_sum_1")
    (flat / "stray-file").write_text("")
    # Triton's own helpers share the cache but are not kernels
    (flat / "DRIVERHASH").mkdir()
    (flat / "DRIVERHASH" / "cuda_utils.so").write_bytes(b"")
    (flat / "LAUNCHERHASH").mkdir()
    (flat / "LAUNCHERHASH" / "__triton_launcher.so").write_bytes(b"")
    inductor_layout = tmp_path / "inductor" / "triton"
    kernel(inductor_layout / "0" / "KERNELHASHC", "triton_poi_fused_cos_2")
    found = triton_kernel_dirs([flat, inductor_layout, tmp_path / "missing"])
    assert {p.rsplit("/", 1)[-1] for p in found} == {"KERNELHASHA", "KERNELHASHB", "KERNELHASHC"}


def test_new_kernel_dirs_are_compiles_unless_the_bundler_emitted_them(tmp_path):
    assert triton_compiled_and_loaded(3, {"bundler_loaded_files": 0, "static_autotuners_loaded": 0}) == (3, 0)
    # a warm FX hit into an empty Triton directory: the bundler writes the kernels back
    assert triton_compiled_and_loaded(3, {"bundler_loaded_files": 24, "static_autotuners_loaded": 3}) == (0, 3)
    before = CounterSnapshot({}, frozenset({"/t/a"}))
    after = CounterSnapshot({}, frozenset({"/t/a", "/t/b"}))
    triton = delta_between(before, after).triton
    assert (triton["compiled"], triton["new_kernel_dirs"]) == (1, 1)


def _kernel(path, name):
    path.mkdir(parents=True)
    (path / f"__grp__{name}.json").write_text("{}")
    (path / f"{name}.cubin").write_bytes(b"")


def test_kernels_already_on_disk_never_count_as_compiled_by_a_test(monkeypatch, tmp_path):
    """A warm persistent cache holds thousands of kernels; a test that first loads torch compiled none of them."""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    _kernel(tmp_path / "WARMKERNEL", "triton_poi_fused_sin_0")
    before = counter_snapshot(empty=True)  # torch first imported by the test: counters start at zero
    assert before.kernel_dirs == frozenset({str(tmp_path / "WARMKERNEL")})
    _kernel(tmp_path / "NEWKERNEL", "triton_poi_fused_cos_1")
    triton = delta_between(before, counter_snapshot()).triton
    assert (triton["compiled"], triton["new_kernel_dirs"]) == (1, 1)


def test_without_a_triton_cache_directory_nothing_is_counted_by_directory(monkeypatch):
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert counter_snapshot().kernel_dirs is None
    assert "compiled" not in delta_between(counter_snapshot(), counter_snapshot()).triton


def test_triton_dirs_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert active_triton_cache_dirs() == []
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    assert active_triton_cache_dirs() == [tmp_path / "triton"]
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "t"))
    assert active_triton_cache_dirs() == [tmp_path / "t"]
