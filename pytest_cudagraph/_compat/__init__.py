"""The gateway: the one place that touches torch's, Triton's, pytest's and xdist's internals.

Callers ask for a capability by name (``recompile_limit_name()``,
``tree_map(fn, tree)``), never for a version number or a private module.  Each
function finds the capability by probing what the installed torch actually has,
and its docstring records which versions differ and how (docs/architecture.md
states the gateway rule).  Nothing here imports torch, Triton, pytest or xdist at import
time.

The modules, by subject.  Every name is re-exported here, so
``from . import _compat; _compat.name`` and ``from ._compat import name`` both work,
but a submodule is imported only when one of its names is first asked for
(``_CAPABILITIES`` maps each name to its submodule): pytest loads the plugin in
every run, and a run that uses no plugin feature imports none of them.

- ``dynamo``: recompile limits, refusing compiles (``raise_on_recompile``, ``no_compiles()``), guard-failure
  reasons and their logs, Dynamo's counters and reset, tracing (dynamic dims, its
  errors, backends, the trace's shape guards);
- ``inductor``: Inductor's compiler entry point, graph partition at custom ops,
  reduce-overhead's cudagraph trees;
- ``cache_layers``: the on-disk compile caches: which layers are on and who said so,
  torch's cache counter names, entries written, bypass reasons, Triton's
  compile listener and kernel directories, portable artifacts, config forwarded
  to a child interpreter;
- ``cache_bundles``: Mega-Cache bundles read section by section as a load reads them, what a
  save re-records after a load, ``torch.compiler.precompile`` and its loader;
- ``cache_lookups``: every cache lookup's key and components, and what a torch
  version leaves out of them;
- ``cache_factors``: what a cache sweep varies (Inductor config entries by name,
  custom graph passes, the config a factor changed, as the key names it);
- ``collectives``: which dispatched ops are torch.distributed collectives (kind, dtype,
  element count), and the NCCL kernels a captured graph holds;
- ``compile_metrics``: torch's compilation metrics, one record per compiled frame with
  the time of each phase (Dynamo, AOTAutograd, Inductor, kernel compiles, cache savings);
- ``instructions``: callgrind's collection toggled around every frame compile
  (``pytest-cudagraph startup --instructions``);
- ``cuda``: device presence and count, allocator snapshots and pools, cuBLAS
  workspaces, non-owning aliases of pool memory;
- ``fx``: op overload names, custom ops, the dispatch-mode base class, pytree;
- ``graph_observer``: every CUDA graph any code captures, as events (torch's graph hooks in 2.14+,
  a wrapper of ``CUDAGraph``'s methods installed only while observing before that);
- ``graph_segments``: breakable CUDA graphs, a chain of graphs captured into one pool
  with eager ops between;
- ``dtypes``: default comparison tolerances, dtypes this torch has;
- ``resets``: ``torch._dynamo.reset()`` and ``torch._logging.set_logs()`` inside a watched block,
  seen and answered (callbacks registered again, logger taps applied again);
- ``state``: the global torch state a test must leave as it found it (configs,
  compile stance, default device, Dynamo's per-code caches), and a tensor's version
  counter (what an in-place write bumps);
- ``pytest_xdist``: pytest's base temp directory, its command-line options, the arguments pytest passes a
  test function, xdist's scope scheduling.
"""

from __future__ import annotations

import importlib
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as they are defined, for type checkers; at run time they load on first use
    from .cache_bundles import (
        BUNDLE_LAYERS,
        TRITON_LAYER,
        bundle_rerecording,
        bundle_sections,
        load_precompiled,
        loaded_sections,
        precompile,
        precompile_error_class,
        precompile_missing,
        torch_version,
    )
    from .cache_factors import (
        DEFAULT_SWEEP_CONFIGS,
        INDUCTOR_CONFIG_NAME,
        compile_config_values,
        config_changes_as_key_components,
        custom_graph_pass_class,
        custom_graph_pass_missing,
        has_inductor_config,
        inductor_config_patch,
    )
    from .cache_layers import (
        CACHE_KEY_CONFIG_MODULES,
        CUSTOM_GRAPH_PASS_CLASS,
        applied_compile_config,
        cache_bypass_loggers,
        cache_counter_names,
        cache_disabled_reasons,
        cache_layers_off_by_user,
        changed_compile_config,
        clear_in_memory_compile_caches,
        counting_fx_graph_cache_writes,
        enable_default_off_caches,
        force_disable_caches_owner,
        fresh_cache_artifact_recording,
        has_portable_cache_artifacts,
        load_cache_artifacts,
        portable_cache_artifacts_missing,
        save_cache_artifacts,
        triton_compilation_knobs,
        triton_kernel_dirs,
    )
    from .cache_lookups import (
        cache_lookup_gaps,
        capturing_cache_lookups,
        functorch_config_snapshot,
    )
    from .collectives import (
        COLLECTIVE_KINDS,
        collective_call,
        collective_recorder_base,
        graph_kernel_names,
        instantiate_kept_graph,
        kernel_names_in_dot,
        nccl_kernel_collective,
        new_readable_cuda_graph,
    )
    from .compile_metrics import (
        COMPILE_METRIC_CAPABILITIES,
        CompilationMetricsTap,
        compile_metric_columns_missing,
    )
    from .cuda import (
        abandon_capture_pool,
        allocation_stacks,
        allocator_counters,
        clear_cublas_workspaces,
        cublas_workspace_sizes,
        cuda_available,
        cuda_device_count,
        device_memory_reading,
        memory_snapshot_segments,
        no_cuda_skip_reason,
        non_owning_alias,
        private_pool_reserved,
    )
    from .cudagraph_trees import (
        RERECORD_REMEDY_NAMES,
        TreeCallMeter,
        cudagraph_skip_context,
    )
    from .distributed import (
        backend_available,
        distributed_available,
        init_rank_process_group,
        process_group_initialized,
        rendezvous_store_client,
        rendezvous_store_server,
    )
    from .dtypes import (
        default_tolerance_table,
    )
    from .dynamo import (
        GRAPH_BREAK_LOG_ARTIFACT,
        MARK_DYNAMIC_CALL,
        RECOMPILE_LOG_ARTIFACTS,
        TORCH_TRACE_LOGGER,
        backend_compiler_failed_type,
        compile_refusal_state,
        counter_value,
        counter_values,
        error_on_recompile,
        fail_on_any_compile,
        graph_break_counter,
        graph_break_log_names,
        guard_failures_table,
        has_fail_on_recompile_stance,
        is_recompile_log,
        is_recompile_refusal,
        is_shape_specialization_error,
        log_artifact_enabled,
        lookup_backend,
        mark_dynamic,
        recompile_limit,
        recompile_limit_logger_names,
        recompile_limit_name,
        recompile_limit_setting,
        recompile_log_names,
        register_dynamo_loggers,
        reset_dynamo,
        set_log_artifact,
        stance_refusal_names_the_frame,
        tracing_shape_guards,
        unsupported_type,
        wrapped_target,
    )
    from .fx import (
        custom_op_overload,
        dispatch_mode_base,
        is_op,
        op_overload_names,
        op_qualified_name,
        tree_flatten,
        tree_leaves,
        tree_map,
        tree_unflatten,
    )
    from .graph_observer import (
        graph_capture_source,
        graph_observer_kind,
        graph_observer_state,
        observing_graphs,
    )
    from .graph_segments import (
        begin_graph_segment,
        end_graph_segment,
        stream_is_capturing,
    )
    from .guards import (
        failing_guards_of_recompile,
    )
    from .inductor import (
        CudagraphRecordingCallback,
        compiled_graph_of_frame,
        cudagraph_skip_logger_names,
        cudagraph_tree_manager,
        cudagraph_tree_node_count,
        cudagraph_tree_pool,
        generated_code_origin,
        inductor_compiler,
        inductor_partition_at_ops,
        inductor_partition_missing,
        is_generated_code,
        load_cudagraph_trees,
        start_compiler,
        watch_cudagraph_recordings,
    )
    from .instructions import count_compile_instructions
    from .pytest_xdist import (
        pyfunc_argnames,
        pytest_log_handlers,
        pytest_option_arities,
        run_basetemp,
        torch_non_propagating_loggers,
        xdist_scope_scheduling,
    )
    from .resets import (
        LoggerTap,
        ResetSubscription,
        on_dynamo_reset,
        on_set_logs,
        set_logs_emptied_artifacts,
    )
    from .state import (
        compile_config_snapshot,
        compile_stance,
        default_device_setting,
        dynamo_cache_entry_counts,
        restore_compile_config,
        restore_compile_stance,
        tensor_version,
    )

# each capability -> the submodule that defines it
_CAPABILITIES = {
    # cache_bundles
    "BUNDLE_LAYERS": "cache_bundles",
    "TRITON_LAYER": "cache_bundles",
    "bundle_rerecording": "cache_bundles",
    "bundle_sections": "cache_bundles",
    "load_precompiled": "cache_bundles",
    "loaded_sections": "cache_bundles",
    "precompile": "cache_bundles",
    "precompile_error_class": "cache_bundles",
    "precompile_missing": "cache_bundles",
    "torch_version": "cache_bundles",
    # cache_layers
    "CACHE_KEY_CONFIG_MODULES": "cache_layers",
    "CUSTOM_GRAPH_PASS_CLASS": "cache_layers",
    "applied_compile_config": "cache_layers",
    "cache_bypass_loggers": "cache_layers",
    "cache_counter_names": "cache_layers",
    "cache_disabled_reasons": "cache_layers",
    "cache_layers_off_by_user": "cache_layers",
    "changed_compile_config": "cache_layers",
    "clear_in_memory_compile_caches": "cache_layers",
    "counting_fx_graph_cache_writes": "cache_layers",
    "enable_default_off_caches": "cache_layers",
    "force_disable_caches_owner": "cache_layers",
    "fresh_cache_artifact_recording": "cache_layers",
    "has_portable_cache_artifacts": "cache_layers",
    "load_cache_artifacts": "cache_layers",
    "portable_cache_artifacts_missing": "cache_layers",
    "save_cache_artifacts": "cache_layers",
    "triton_compilation_knobs": "cache_layers",
    "triton_kernel_dirs": "cache_layers",
    # cache_factors
    "DEFAULT_SWEEP_CONFIGS": "cache_factors",
    "INDUCTOR_CONFIG_NAME": "cache_factors",
    "compile_config_values": "cache_factors",
    "config_changes_as_key_components": "cache_factors",
    "custom_graph_pass_class": "cache_factors",
    "custom_graph_pass_missing": "cache_factors",
    "has_inductor_config": "cache_factors",
    "inductor_config_patch": "cache_factors",
    # collectives
    "COLLECTIVE_KINDS": "collectives",
    "collective_call": "collectives",
    "collective_recorder_base": "collectives",
    "graph_kernel_names": "collectives",
    "instantiate_kept_graph": "collectives",
    "kernel_names_in_dot": "collectives",
    "nccl_kernel_collective": "collectives",
    "new_readable_cuda_graph": "collectives",
    # cache_lookups
    "cache_lookup_gaps": "cache_lookups",
    "capturing_cache_lookups": "cache_lookups",
    "functorch_config_snapshot": "cache_lookups",
    # compile_metrics
    "COMPILE_METRIC_CAPABILITIES": "compile_metrics",
    "CompilationMetricsTap": "compile_metrics",
    "compile_metric_columns_missing": "compile_metrics",
    # cuda
    "abandon_capture_pool": "cuda",
    "allocator_counters": "cuda",
    "allocation_stacks": "cuda",
    "clear_cublas_workspaces": "cuda",
    "cublas_workspace_sizes": "cuda",
    "cuda_available": "cuda",
    "cuda_device_count": "cuda",
    "device_memory_reading": "cuda",
    "memory_snapshot_segments": "cuda",
    "no_cuda_skip_reason": "cuda",
    "non_owning_alias": "cuda",
    "private_pool_reserved": "cuda",
    # cudagraph_trees
    "RERECORD_REMEDY_NAMES": "cudagraph_trees",
    "TreeCallMeter": "cudagraph_trees",
    "cudagraph_skip_context": "cudagraph_trees",
    # distributed
    "backend_available": "distributed",
    "distributed_available": "distributed",
    "init_rank_process_group": "distributed",
    "process_group_initialized": "distributed",
    "rendezvous_store_client": "distributed",
    "rendezvous_store_server": "distributed",
    # dtypes
    "default_tolerance_table": "dtypes",
    # dynamo
    "GRAPH_BREAK_LOG_ARTIFACT": "dynamo",
    "MARK_DYNAMIC_CALL": "dynamo",
    "RECOMPILE_LOG_ARTIFACTS": "dynamo",
    "TORCH_TRACE_LOGGER": "dynamo",
    "backend_compiler_failed_type": "dynamo",
    "compile_refusal_state": "dynamo",
    "counter_value": "dynamo",
    "counter_values": "dynamo",
    "error_on_recompile": "dynamo",
    "fail_on_any_compile": "dynamo",
    "graph_break_counter": "dynamo",
    "graph_break_log_names": "dynamo",
    "guard_failures_table": "dynamo",
    "has_fail_on_recompile_stance": "dynamo",
    "is_recompile_log": "dynamo",
    "is_recompile_refusal": "dynamo",
    "is_shape_specialization_error": "dynamo",
    "log_artifact_enabled": "dynamo",
    "lookup_backend": "dynamo",
    "mark_dynamic": "dynamo",
    "recompile_limit": "dynamo",
    "recompile_limit_logger_names": "dynamo",
    "recompile_limit_name": "dynamo",
    "recompile_limit_setting": "dynamo",
    "recompile_log_names": "dynamo",
    "register_dynamo_loggers": "dynamo",
    "reset_dynamo": "dynamo",
    "set_log_artifact": "dynamo",
    "stance_refusal_names_the_frame": "dynamo",
    "tracing_shape_guards": "dynamo",
    "unsupported_type": "dynamo",
    "wrapped_target": "dynamo",
    # fx
    "custom_op_overload": "fx",
    "dispatch_mode_base": "fx",
    "is_op": "fx",
    "op_overload_names": "fx",
    "op_qualified_name": "fx",
    "tree_flatten": "fx",
    "tree_leaves": "fx",
    "tree_map": "fx",
    "tree_unflatten": "fx",
    # graph_observer
    "graph_capture_source": "graph_observer",
    "graph_observer_kind": "graph_observer",
    "graph_observer_state": "graph_observer",
    "observing_graphs": "graph_observer",
    # graph_segments
    "begin_graph_segment": "graph_segments",
    "end_graph_segment": "graph_segments",
    "stream_is_capturing": "graph_segments",
    # guards
    "failing_guards_of_recompile": "guards",
    # inductor
    "compiled_graph_of_frame": "inductor",
    "cudagraph_skip_logger_names": "inductor",
    "cudagraph_tree_manager": "inductor",
    "cudagraph_tree_node_count": "inductor",
    "cudagraph_tree_pool": "inductor",
    "generated_code_origin": "inductor",
    "inductor_compiler": "inductor",
    "inductor_partition_at_ops": "inductor",
    "inductor_partition_missing": "inductor",
    "is_generated_code": "inductor",
    "load_cudagraph_trees": "inductor",
    "start_compiler": "inductor",
    "watch_cudagraph_recordings": "inductor",
    "CudagraphRecordingCallback": "inductor",
    # resets
    "LoggerTap": "resets",
    "ResetSubscription": "resets",
    "on_dynamo_reset": "resets",
    "on_set_logs": "resets",
    "set_logs_emptied_artifacts": "resets",
    # instructions
    "count_compile_instructions": "instructions",
    # pytest_xdist
    "pyfunc_argnames": "pytest_xdist",
    "pytest_log_handlers": "pytest_xdist",
    "pytest_option_arities": "pytest_xdist",
    "run_basetemp": "pytest_xdist",
    "torch_non_propagating_loggers": "pytest_xdist",
    "xdist_scope_scheduling": "pytest_xdist",
    # state
    "compile_config_snapshot": "state",
    "compile_stance": "state",
    "default_device_setting": "state",
    "dynamo_cache_entry_counts": "state",
    "restore_compile_config": "state",
    "restore_compile_stance": "state",
    "tensor_version": "state",
}

__all__ = [
    "BUNDLE_LAYERS",
    "TRITON_LAYER",
    "bundle_rerecording",
    "bundle_sections",
    "load_precompiled",
    "loaded_sections",
    "precompile",
    "precompile_error_class",
    "precompile_missing",
    "torch_version",
    "COMPILE_METRIC_CAPABILITIES",
    "CompilationMetricsTap",
    "compile_metric_columns_missing",
    "count_compile_instructions",
    "TORCH_TRACE_LOGGER",
    "pytest_log_handlers",
    "CACHE_KEY_CONFIG_MODULES",
    "CUSTOM_GRAPH_PASS_CLASS",
    "DEFAULT_SWEEP_CONFIGS",
    "INDUCTOR_CONFIG_NAME",
    "compile_config_values",
    "config_changes_as_key_components",
    "custom_graph_pass_class",
    "custom_graph_pass_missing",
    "has_inductor_config",
    "inductor_config_patch",
    "RECOMPILE_LOG_ARTIFACTS",
    "abandon_capture_pool",
    "allocation_stacks",
    "applied_compile_config",
    "backend_compiler_failed_type",
    "cache_bypass_loggers",
    "cache_counter_names",
    "cache_disabled_reasons",
    "cache_layers_off_by_user",
    "cache_lookup_gaps",
    "capturing_cache_lookups",
    "changed_compile_config",
    "clear_cublas_workspaces",
    "device_memory_reading",
    "clear_in_memory_compile_caches",
    "compile_config_snapshot",
    "compile_stance",
    "compile_refusal_state",
    "counter_value",
    "counter_values",
    "counting_fx_graph_cache_writes",
    "cuda_available",
    "cuda_device_count",
    "cudagraph_skip_logger_names",
    "cudagraph_tree_manager",
    "cudagraph_tree_node_count",
    "cudagraph_tree_pool",
    "custom_op_overload",
    "default_device_setting",
    "default_tolerance_table",
    "dispatch_mode_base",
    "dynamo_cache_entry_counts",
    "enable_default_off_caches",
    "error_on_recompile",
    "fail_on_any_compile",
    "force_disable_caches_owner",
    "fresh_cache_artifact_recording",
    "functorch_config_snapshot",
    "graph_break_counter",
    "guard_failures_table",
    "RERECORD_REMEDY_NAMES",
    "TreeCallMeter",
    "cudagraph_skip_context",
    "compiled_graph_of_frame",
    "generated_code_origin",
    "is_generated_code",
    "GRAPH_BREAK_LOG_ARTIFACT",
    "graph_break_log_names",
    "failing_guards_of_recompile",
    "has_fail_on_recompile_stance",
    "has_portable_cache_artifacts",
    "inductor_compiler",
    "inductor_partition_at_ops",
    "inductor_partition_missing",
    "is_op",
    "is_recompile_log",
    "is_recompile_refusal",
    "is_shape_specialization_error",
    "load_cache_artifacts",
    "load_cudagraph_trees",
    "log_artifact_enabled",
    "lookup_backend",
    "mark_dynamic",
    "memory_snapshot_segments",
    "no_cuda_skip_reason",
    "non_owning_alias",
    "op_overload_names",
    "op_qualified_name",
    "portable_cache_artifacts_missing",
    "pyfunc_argnames",
    "pytest_option_arities",
    "recompile_limit",
    "recompile_limit_logger_names",
    "MARK_DYNAMIC_CALL",
    "recompile_limit_name",
    "recompile_limit_setting",
    "recompile_log_names",
    "register_dynamo_loggers",
    "reset_dynamo",
    "restore_compile_config",
    "restore_compile_stance",
    "tensor_version",
    "run_basetemp",
    "save_cache_artifacts",
    "set_log_artifact",
    "stance_refusal_names_the_frame",
    "start_compiler",
    "torch_non_propagating_loggers",
    "tracing_shape_guards",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_unflatten",
    "triton_compilation_knobs",
    "triton_kernel_dirs",
    "unsupported_type",
    "watch_cudagraph_recordings",
    "CudagraphRecordingCallback",
    "LoggerTap",
    "ResetSubscription",
    "on_dynamo_reset",
    "on_set_logs",
    "set_logs_emptied_artifacts",
    "wrapped_target",
    "xdist_scope_scheduling",
    "backend_available",
    "distributed_available",
    "init_rank_process_group",
    "process_group_initialized",
    "rendezvous_store_client",
    "rendezvous_store_server",
    "begin_graph_segment",
    "end_graph_segment",
    "stream_is_capturing",
    "cublas_workspace_sizes",
    "allocator_counters",
    "private_pool_reserved",
    "graph_capture_source",
    "graph_observer_kind",
    "graph_observer_state",
    "observing_graphs",
    "COLLECTIVE_KINDS",
    "collective_call",
    "collective_recorder_base",
    "graph_kernel_names",
    "instantiate_kept_graph",
    "kernel_names_in_dot",
    "nccl_kernel_collective",
    "new_readable_cuda_graph",
]


def __getattr__(name: str) -> Any:
    """The capability ``name``, its submodule imported on first use and the name kept here from then on."""
    module = _CAPABILITIES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    submodule = globals().get(module)
    if not isinstance(submodule, types.ModuleType):
        # (once imported, the submodule stays an attribute of this package, even where an in-process
        # pytester run dropped it from sys.modules: every name then comes from the one copy)
        submodule = importlib.import_module(f"{__name__}.{module}")
    value = getattr(submodule, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_CAPABILITIES})
