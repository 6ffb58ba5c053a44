"""``opt -O3`` and ``llc -O3`` in one call, in process, on the pinned wheels' ``libLLVM.so``.

The ``so`` stage (:mod:`.aot`) ran ``opt`` and ``llc`` as two processes, and each
spent its first 20-40 ms loading ``libLLVM.so`` before it read the kernel. The
compile daemon (:mod:`.zygote`) loads that library once, before it forks its
children, and a child builds the kernel's object through LLVM's C API with
:mod:`ctypes`:

1. parse ``kernel.ll`` (``LLVMParseIRInContext``);
2. give every function the attributes ``opt`` and ``llc`` give it from ``-mcpu``
   and ``-mattr`` (``target-cpu`` where it has none; ``-mattr`` appended to its own
   ``target-features``), so that both passes see the same subtargets;
3. ``LLVMRunPasses(module, "default<O3>", machine)``, ``opt -O3``'s pipeline;
4. ``LLVMTargetMachineEmitToMemoryBuffer``: ``llc -O3 -filetype=obj
   -relocation-model=pic``.

The output is the same object: a test compares the optimized IR with
``opt -O3 -S``'s. Tool options that are not ``-mtriple``, ``-mcpu`` or ``-mattr``
(``-prefer-predicate-over-epilogue``) are LLVM's process-wide command-line
options: they are set once per process (``LLVMParseCommandLineOptions``), and a
build that needs other ones than the process has goes back to the tools.

Only the daemon's children use it (:func:`enable`): LLVM ends the process on a
fatal error, and a child that dies is reported as a crash while the daemon goes
on; a build in the user's own process keeps the tools.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from ctypes import POINTER, byref, c_char_p, c_int, c_size_t, c_uint, c_void_p

from sparsecomp.errors import ToolchainError

#: ``LLVMInitialize<Name>...`` for each architecture's triple prefix.
_TARGETS = {"x86_64": "X86", "aarch64": "AArch64"}
_INIT_STEPS = ("TargetInfo", "Target", "TargetMC", "AsmPrinter")
#: ``LLVMCodeGenOptLevel``, ``LLVMRelocMode`` and ``LLVMCodeModel`` values.
_AGGRESSIVE, _PIC, _DEFAULT_MODEL = 3, 2, 0
_OBJECT_FILE = 1
_FUNCTION_INDEX = 0xFFFFFFFF

_lib: ctypes.CDLL | None = None
_initialized: set[str] = set()
#: The command-line options this process has given LLVM (None: none yet).
_cl_options: tuple[str, ...] | None = None


def _signatures(lib: ctypes.CDLL) -> None:
    p = POINTER
    table: dict[str, tuple[object, list[object]]] = {
        "LLVMContextCreate": (c_void_p, []),
        "LLVMContextDispose": (None, [c_void_p]),
        "LLVMCreateMemoryBufferWithMemoryRangeCopy": (c_void_p, [c_char_p, c_size_t, c_char_p]),
        "LLVMParseIRInContext": (c_int, [c_void_p, c_void_p, p(c_void_p), p(c_void_p)]),
        "LLVMDisposeModule": (None, [c_void_p]),
        "LLVMDisposeMessage": (None, [c_void_p]),
        "LLVMGetTargetFromTriple": (c_int, [c_char_p, p(c_void_p), p(c_void_p)]),
        "LLVMCreateTargetMachine": (
            c_void_p, [c_void_p, c_char_p, c_char_p, c_char_p, c_int, c_int, c_int]),
        "LLVMDisposeTargetMachine": (None, [c_void_p]),
        "LLVMSetTarget": (None, [c_void_p, c_char_p]),
        "LLVMCreateTargetDataLayout": (c_void_p, [c_void_p]),
        "LLVMSetModuleDataLayout": (None, [c_void_p, c_void_p]),
        "LLVMDisposeTargetData": (None, [c_void_p]),
        "LLVMGetFirstFunction": (c_void_p, [c_void_p]),
        "LLVMGetNextFunction": (c_void_p, [c_void_p]),
        "LLVMGetModuleContext": (c_void_p, [c_void_p]),
        "LLVMGetStringAttributeAtIndex": (c_void_p, [c_void_p, c_uint, c_char_p, c_uint]),
        "LLVMGetStringAttributeValue": (c_void_p, [c_void_p, p(c_uint)]),
        "LLVMCreateStringAttribute": (c_void_p, [c_void_p, c_char_p, c_uint, c_char_p, c_uint]),
        "LLVMAddAttributeAtIndex": (None, [c_void_p, c_uint, c_void_p]),
        "LLVMCreatePassBuilderOptions": (c_void_p, []),
        "LLVMDisposePassBuilderOptions": (None, [c_void_p]),
        "LLVMRunPasses": (c_void_p, [c_void_p, c_char_p, c_void_p, c_void_p]),
        "LLVMGetErrorMessage": (c_void_p, [c_void_p]),
        "LLVMDisposeErrorMessage": (None, [c_void_p]),
        "LLVMTargetMachineEmitToMemoryBuffer": (
            c_int, [c_void_p, c_void_p, c_int, p(c_void_p), p(c_void_p)]),
        "LLVMGetBufferStart": (c_void_p, [c_void_p]),
        "LLVMGetBufferSize": (c_size_t, [c_void_p]),
        "LLVMDisposeMemoryBuffer": (None, [c_void_p]),
        "LLVMPrintModuleToString": (c_void_p, [c_void_p]),
        "LLVMParseCommandLineOptions": (None, [c_int, p(c_char_p), c_char_p]),
    }  # fmt: skip
    for name, (restype, argtypes) in table.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes


def enable() -> bool:
    """Load ``libLLVM.so`` for this process and the children it forks; whether it
    loaded (without it, or without a C API function this needs, builds keep the
    tools). The compile daemon calls it before it listens."""
    global _lib
    if _lib is not None:
        return True
    from sparsecomp.ir.odsgen import tool

    try:
        path = tool("opt").parent.parent / "lib" / "libLLVM.so"
        lib = ctypes.CDLL(str(path))
        _signatures(lib)
    except (OSError, AttributeError, ToolchainError):
        return False
    _lib = lib
    return True


def enabled() -> bool:
    """Whether :func:`enable` loaded the library in this process (or its parent)."""
    return _lib is not None


def _initialize(lib: ctypes.CDLL, arch: str) -> bool:
    name = _TARGETS.get(arch)
    if name is None:
        return False
    if name not in _initialized:
        try:
            steps = [getattr(lib, f"LLVMInitialize{name}{step}") for step in _INIT_STEPS]
        except AttributeError:
            return False
        for step in steps:
            step.restype, step.argtypes = None, []
            step()
        _initialized.add(name)
    return True


def usable(triple: str, cl_options: Sequence[str]) -> bool:
    """Whether :func:`compile_object` can build for ``triple`` with the process-wide
    ``cl_options`` in this process (the library loaded, the target in it, and the
    options those this process has, or none given yet)."""
    if _lib is None or not _initialize(_lib, triple.split("-")[0]):
        return False
    return _cl_options is None or _cl_options == tuple(cl_options)


def _set_cl_options(lib: ctypes.CDLL, options: Sequence[str]) -> None:
    global _cl_options
    if _cl_options is None:
        if options:
            argv = [b"sparsecomp", *(o.encode() for o in options)]
            lib.LLVMParseCommandLineOptions(len(argv), (c_char_p * len(argv))(*argv), None)
        _cl_options = tuple(options)


def _message(lib: ctypes.CDLL, pointer: c_void_p) -> str:
    text = ctypes.string_at(pointer.value).decode(errors="replace") if pointer.value else ""
    if pointer.value:
        lib.LLVMDisposeMessage(pointer)
    return text


def _string_attribute(lib: ctypes.CDLL, function: int, key: bytes) -> bytes | None:
    attribute = lib.LLVMGetStringAttributeAtIndex(function, _FUNCTION_INDEX, key, len(key))
    if not attribute:
        return None
    length = c_uint()
    value = lib.LLVMGetStringAttributeValue(attribute, byref(length))
    return ctypes.string_at(value, length.value)


def _set_function_attributes(lib: ctypes.CDLL, module: int, cpu: str, features: str) -> None:
    """What ``opt``'s and ``llc``'s ``-mcpu`` and ``-mattr`` do to each function."""
    context = lib.LLVMGetModuleContext(module)

    def put(function: int, key: bytes, value: bytes) -> None:
        attribute = lib.LLVMCreateStringAttribute(context, key, len(key), value, len(value))
        lib.LLVMAddAttributeAtIndex(function, _FUNCTION_INDEX, attribute)

    function = lib.LLVMGetFirstFunction(module)
    while function:
        if cpu and _string_attribute(lib, function, b"target-cpu") is None:
            put(function, b"target-cpu", cpu.encode())
        if features:
            own = _string_attribute(lib, function, b"target-features")
            value = features.encode() if not own else own + b"," + features.encode()
            put(function, b"target-features", value)
        function = lib.LLVMGetNextFunction(function)


def compile_object(
    text: str,
    triple: str,
    cpu: str,
    features: str,
    cl_options: Sequence[str] = (),
    optimized_ir: list[str] | None = None,
) -> bytes:
    """The object file of LLVM IR ``text``, as ``opt -O3`` then ``llc -O3 -filetype=obj
    -relocation-model=pic`` with ``-mtriple=triple -mcpu=cpu -mattr=features`` and
    ``cl_options`` would make it (check :func:`usable` first). ``optimized_ir``: the
    module after ``opt``'s passes is appended to it, as text."""
    lib = _lib
    if lib is None or not usable(triple, cl_options):
        raise ToolchainError("LLVM's library is not loaded in this process for this build")
    _set_cl_options(lib, cl_options)
    context = lib.LLVMContextCreate()
    module, machine, options, layout = c_void_p(), None, None, None
    try:
        data = text.encode()
        buffer = lib.LLVMCreateMemoryBufferWithMemoryRangeCopy(data, len(data), b"kernel.ll")
        error = c_void_p()
        if lib.LLVMParseIRInContext(context, buffer, byref(module), byref(error)):
            raise ToolchainError(f"LLVM could not parse kernel.ll: {_message(lib, error)}")
        target = c_void_p()
        if lib.LLVMGetTargetFromTriple(triple.encode(), byref(target), byref(error)):
            raise ToolchainError(f"LLVM has no target {triple}: {_message(lib, error)}")
        machine = lib.LLVMCreateTargetMachine(
            target, triple.encode(), cpu.encode(), features.encode(),
            _AGGRESSIVE, _PIC, _DEFAULT_MODEL,
        )  # fmt: skip
        lib.LLVMSetTarget(module, triple.encode())
        layout = lib.LLVMCreateTargetDataLayout(machine)
        lib.LLVMSetModuleDataLayout(module, layout)
        _set_function_attributes(lib, module.value or 0, cpu, features)
        options = lib.LLVMCreatePassBuilderOptions()
        failure = lib.LLVMRunPasses(module, b"default<O3>", machine, options)
        if failure:
            message = lib.LLVMGetErrorMessage(failure)
            text = ctypes.string_at(message).decode(errors="replace")
            lib.LLVMDisposeErrorMessage(message)
            raise ToolchainError(f"LLVM's O3 passes failed on kernel.ll: {text}")
        if optimized_ir is not None:
            optimized_ir.append(_message(lib, c_void_p(lib.LLVMPrintModuleToString(module))))
        out = c_void_p()
        if lib.LLVMTargetMachineEmitToMemoryBuffer(
            machine, module, _OBJECT_FILE, byref(error), byref(out)
        ):
            raise ToolchainError(f"LLVM could not emit the kernel's object: {_message(lib, error)}")
        try:
            return ctypes.string_at(lib.LLVMGetBufferStart(out), lib.LLVMGetBufferSize(out))
        finally:
            lib.LLVMDisposeMemoryBuffer(out)
    finally:
        if options:
            lib.LLVMDisposePassBuilderOptions(options)
        if layout:
            lib.LLVMDisposeTargetData(layout)
        if module.value:
            lib.LLVMDisposeModule(module)
        if machine:
            lib.LLVMDisposeTargetMachine(machine)
        lib.LLVMContextDispose(context)

