"""Scenario configuration, one concern per module:

    schema.py   the pydantic models of a scenario and the caps of every range
    files.py    reading scenario, sweep and trace files (size caps, UTF-8, TOML guards)
    outputs.py  writing: output paths checked before any work, files written atomically
    edit.py     the one edit path: --set, the API's set/with_/edit, the explorer's form
    kinds.py    workload kinds: the descriptor each kind registers (models/workloads/)
    errors.py   ConfigError and the one translator of pydantic's errors into it

A scenario is a TOML document (or a built-in one) plus ``--set PATH=VALUE``
overrides. Every error becomes one line naming the field and the reason
(``ConfigError``), which the CLI prints with exit code 2. The names below are the
package's interface; import them from ``warmcore.simcore.config``.
"""

from warmcore.simcore.config.edit import (
    OWNED,
    apply_sets,
    changed_owners,
    edit_scenario,
    load,
    parse_set,
    resets,
    set_path,
    set_run_limit,
)
from warmcore.simcore.config.errors import (
    PLAIN_MESSAGES,
    ConfigError,
    config_error,
    plain_message,
    short_repr,
)
from warmcore.simcore.config.kinds import (
    WORKLOADS,
    WorkloadKind,
    has_sockets,
    kind_of,
    register_workload,
    workload_kinds,
)
from warmcore.simcore.config.files import (
    BUILTIN_DIR,
    MAX_FILE_BYTES,
    MAX_TOML_NESTING,
    MAX_TRACE_ARRIVALS,
    MAX_TRACE_BYTES,
    builtin_names,
    decode_utf8,
    parse_toml,
    read_capped,
    read_scenario_dict,
    read_text,
    toml_nesting,
)
from warmcore.simcore.config.outputs import (
    check_output_dir,
    check_output_file,
    write_atomic,
    write_atomic_with,
)
from warmcore.simcore.config.schema import (
    FILE,
    FLOAT_FLOOR,
    MAX_COUNT,
    MAX_HORIZON_S,
    MAX_IN_FLIGHT,
    MAX_KIB,
    MAX_LIST,
    MAX_OPS,
    MAX_PROGRAM_STEPS,
    MAX_RATE,
    MAX_REPLICATIONS,
    MAX_REQUESTS,
    MAX_TRACE_EVENTS,
    MAX_US,
    MIN_US,
    Effects,
    JvmCfg,
    KeepAlive,
    KernelCfg,
    MachineCfg,
    ProcessCfg,
    ResourceCfg,
    RunCfg,
    Scenario,
    ServiceShape,
    Step,
    StrategyCfg,
    Strict,
    WorkCfg,
    Workload,
    over_cap,
    files_named,
    validate,
)

__all__ = [
    "BUILTIN_DIR", "ConfigError", "FILE", "Effects", "FLOAT_FLOOR", "JvmCfg", "KeepAlive",
    "KernelCfg",
    "MAX_COUNT", "MAX_FILE_BYTES", "MAX_HORIZON_S", "MAX_IN_FLIGHT", "MAX_KIB", "MAX_LIST",
    "MAX_OPS", "MAX_PROGRAM_STEPS", "MAX_RATE", "MAX_REPLICATIONS", "MAX_REQUESTS",
    "MAX_TOML_NESTING", "MAX_TRACE_ARRIVALS", "MAX_TRACE_BYTES", "MAX_TRACE_EVENTS", "MAX_US",
    "MIN_US", "MachineCfg", "check_output_dir", "check_output_file", "write_atomic",
    "write_atomic_with", "OWNED", "PLAIN_MESSAGES", "ProcessCfg", "ResourceCfg", "RunCfg",
    "Scenario", "ServiceShape", "Step", "StrategyCfg", "Strict", "WORKLOADS", "WorkCfg",
    "Workload", "WorkloadKind", "apply_sets", "builtin_names", "changed_owners",
    "config_error", "decode_utf8", "edit_scenario", "files_named", "has_sockets", "kind_of",
    "load",
    "over_cap", "parse_set", "parse_toml", "plain_message", "read_capped",
    "read_scenario_dict", "read_text", "register_workload", "resets", "set_path",
    "set_run_limit", "short_repr", "toml_nesting", "validate", "workload_kinds",
]
