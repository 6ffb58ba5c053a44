"""Loading a compiled kernel directory and calling its functions (no MLIR needed).

A kernel directory holds ``kernel.so`` and ``manifest.json`` (format in
docs/cpu-abi.md), perhaps the runtime libraries it needs and the IR of
each compiler stage (``*.mlir``). :func:`load` reads it; the
:class:`Executable` calls its public functions with numpy arrays, scalars,
scipy.sparse matrices and :class:`~sparsecomp.formats.tensor.SparseTensor`::

    exe = sparsecomp.load("spmv.kernel")
    y = exe(a_csr, x)            # the module's only public function
    y = exe.spmv(a_csr, x)       # by name
    exe.functions["spmv"].signature.describe()
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from sparsecomp.errors import ArgumentError, SparsecompError, TargetError
from sparsecomp.formats.names import parse_layout
from sparsecomp.runtime import loader, specialize
from sparsecomp.runtime.abi import Signature, parse_signature, uncallable_reason
from sparsecomp.runtime.call import Caller
from sparsecomp.runtime.chain import ChainFunction
from sparsecomp.runtime.destinations import Destinations, MakeVariant
from sparsecomp.runtime.fastcall import MISS, native_router
from sparsecomp.runtime.libs import LIBRARIES, library_path
from sparsecomp.runtime.plan import HOST_ONLY, Conversion, Plan, Transfer
from sparsecomp.runtime.prepared import Prepared, infer_op, prepare
from sparsecomp.runtime.profile import MAX_RECORDS, Profile, profile_call
from sparsecomp.runtime.specialize import SizeSpecializer, Specializer, static_candidates
from sparsecomp.targets import CpuTarget, detect_host, target_from_attr

MANIFEST = "manifest.json"
FORMAT = 1
#: The files beside a library that :meth:`Executable.save` copies: stage IR, LLVM IR,
#: a CUDA executable's kernels.
_STAGE_SUFFIXES = (".mlir", ".ll", ".ptx", ".cubin")

LOG = logging.getLogger("sparsecomp")


#: ``(function, {argument: layout attribute text}[, {argument: {dimension: size}}[,
#: guarded arguments[, {result: destination argument}[, {compile option: value}]]]])
#: -> Executable`` (``Executable.recompile``)
Recompile = Callable[..., "Executable"]


class UnknownFunctionError(SparsecompError, AttributeError, KeyError):
    """No public function of that name (also an AttributeError and a KeyError)."""


class Function:
    """One public function; calling it checks and marshals the arguments (call.py)."""

    def __init__(
        self,
        library: ctypes.CDLL,
        signature: Signature,
        make_caller: Callable[..., Caller] = Caller,
        directory: Path | None = None,
    ) -> None:
        self.signature = signature
        #: the kernel directory it was loaded from (its stage IR is there)
        self.directory = directory
        #: the program its variants derive from (set by ``sparsecomp.compile``; the
        #: directory where None): a prepared operand must come from the same one
        self.family: str | None = None
        self._caller: Caller | None = None
        self._library = library
        self._make_caller = make_caller
        #: compiles variants for other index widths (:mod:`.specialize`); None: convert
        self.specializer: Specializer | None = None
        #: compiles variants for a call's dense sizes (:mod:`.specialize`); None: never
        self.sizes: SizeSpecializer | None = None
        #: which C kernel takes a call (:mod:`.fastcall`); made at the first call
        self._router: Any = None
        self._routed = False
        #: compiles the variant for calls with ``out=`` (:mod:`.destinations`); None: copy
        self.make_destinations: MakeVariant | None = None
        self._destinations: Destinations | None = None

    def __reduce__(self) -> str | tuple[Any, ...]:
        """Pickled as its kernel directory and name: unpickled (a ``spawn`` pool's
        worker), it is that function of ``sparsecomp.load(directory)``."""
        if self.directory is None:
            raise SparsecompError(
                f"'{self.signature.name}' has no kernel directory to pickle it by",
                hint="save its executable (exe.save(dir)) and sparsecomp.load(dir) there",
            )
        return (_loaded_function, (str(self.directory), self.signature.name))

    def __copy__(self) -> Function:
        return self  # a handle on a loaded library: copies share it

    def __deepcopy__(self, memo: dict[int, Any]) -> Function:
        return self

    @property
    def name(self) -> str:
        return self.signature.name

    def __call__(self, *args: Any, out: Any = None) -> Any:
        """Call the kernel: one Python object per ABI argument, in order.

        Dense: a numpy array of exactly the ABI dtype and rank (copied when
        not C-contiguous); scalar: a Python number or a same-dtype numpy
        scalar; sparse: a scipy.sparse matrix or a SparseTensor (converted
        to the ABI layout). Returns ``None``, one result, or a tuple.
        ``out``: an array (a tuple, one per result, with several) the result
        is written into, and returned (:mod:`.destinations`).
        """
        if out is not None:
            return self._into(args, out)
        router = self._router
        if router is not None and (got := router(args)) is not MISS:
            return got  # the C path took it
        return self._call(args)

    def _call(self, args: tuple[Any, ...]) -> Any:
        """The Python path: pick a variant, then call; routes calls like these to C."""
        caller = self._get_caller()
        if not self._routed:
            self._routed = True
            if caller.native is not None:
                self._router = native_router(self.sizes.dims if self.sizes else ())
        sizes = self.sizes
        if sizes is not None and (variant := sizes.pick(args)) is not None:
            self._learn(args, variant, True)
            try:
                return variant(*args)
            except ArgumentError:
                pass  # its message names the variant's sizes: this function's call says why
        other = self._divert(args)  # before the fast path: it would take a scipy operand
        if other is not None:
            if isinstance(other, Function):
                self._learn(args, other, True)
            return other(*args)
        self._learn(args, self, False)
        return caller.call_diverted(args)

    def _into(self, args: tuple[Any, ...], out: Any) -> Any:
        prepared = self._prepared(args)
        if prepared is not None:  # its variant writes into ``out``
            return prepared.call(args, out)
        destinations = self._destinations
        if destinations is None:
            destinations = Destinations(self.signature, self.__call__, self.make_destinations)
            self._destinations = destinations
        return destinations(args, out)

    def _get_caller(self) -> Caller:
        caller = self._caller
        if caller is None:
            spec = self.specializer
            if spec is not None and spec.guardable:  # large scipy operands: to a variant
                spec.decline[0] = specialize.GUARD_FROM
                caller = self._make_caller(self._library, self.signature, scipy_limit=spec.decline)
            else:
                caller = self._make_caller(self._library, self.signature)
            self._caller = caller
            caller.divert = self._divert
        return caller

    def _learn(self, args: tuple[Any, ...], target: Function, variant: bool) -> None:
        """Route calls like ``args`` to the C kernel that takes them in ``target``
        (itself or its variant for the operands' index widths), if one does."""
        if self._router is None:
            return
        kernel, via_variant = target._native_for(args)
        if kernel is not None:
            self._router.add(args, kernel, variant or via_variant)

    def _native_for(self, args: tuple[Any, ...]) -> tuple[Any, bool]:
        """The C kernel that takes ``args`` here, and whether it is an index-width variant's."""
        native = self._get_caller().native
        if native is None:
            return None, False
        other = self._divert(args)  # a prepared operand's call is no Function: not routed
        if isinstance(other, Function):
            kernel, _ = other._native_for(args)
            return kernel, True
        if native.accepts(args):
            return native, False
        return None, False

    def _divert(self, args: tuple[Any, ...]) -> Callable[..., Any] | None:
        """What runs a call the fast path did not take, instead of converting its
        arguments: a prepared operand's variant, or the variant for the arguments'
        index widths (:mod:`.specialize`); None: the careful path."""
        prepared = self._prepared(args)
        if prepared is not None:
            return lambda *given: prepared.call(given)
        return self.specializer.pick(args) if self.specializer is not None else None

    def _prepared(self, args: tuple[Any, ...]) -> Prepared | None:
        """The prepared operand among ``args``, checked to be this function's and in
        its place; None if there is none."""
        found = None
        for i, arg in enumerate(args):
            if type(arg) is not Prepared:
                continue
            if arg.function != self.name:
                raise SparsecompError(
                    f"'{self.name}' was given an operand prepared for '{arg.function}'"
                )
            if arg.owner is not None and arg.owner != (self.family or str(self.directory)):
                raise SparsecompError(
                    f"'{self.name}' was given an operand another executable prepared (its "
                    f"'{arg.function}' in {arg.owner}): it would run that executable's kernel",
                    hint="prepare it with this executable (exe.prepare(A)), or pass the "
                    "packed tensor itself (prepared.tensor)",
                )
            if i != arg.argument or found is not None:
                raise SparsecompError(
                    f"'{self.name}' was given an operand prepared for its argument "
                    f"{arg.argument} as argument {i}"
                )
            found = arg
        return found

    def profile(self, *args: Any, max_records: int = MAX_RECORDS) -> Profile:
        """Call it and count the global-memory traffic of its emulated GPU kernels.

        Needs an executable compiled with ``target="cuda-emu:sm_XX",
        profile=True``; see :mod:`sparsecomp.runtime.profile`. The result of
        the call is ``.result`` of the returned :class:`Profile`. Past
        ``max_records`` accesses the recorder samples blocks and scales its
        counts (``Profile.sampled``); 0 keeps every access.
        """
        if any(isinstance(a, Prepared) and a.variant is not self for a in args):
            # it runs another library, which the recorder here does not count: a profile
            # of nothing (0 accesses, every efficiency 1.0)
            raise SparsecompError(
                f"'{self.name}': a prepared operand runs a variant compiled for its layout, "
                "which profile() does not count",
                hint="profile with the matrix itself, or compile the function with that "
                "layout as its own (sparsecomp.compile(..., profile=True)) and profile that",
            )
        return profile_call(self._library, lambda: self(*args), max_records)

    def __repr__(self) -> str:
        return f"<sparsecomp function {self.signature.describe()}>"


def _runs_tf32(signature: Signature, prepared: Prepared) -> bool:
    """Whether ``prepared``'s variant multiplies f32 blocks (BSR, or a composable's BSR
    part) that a GPU's tensor cores take as tf32."""
    argument = prepared.argument
    if signature.args[argument].dtype.name != "float32":
        return False
    name = prepared.layout
    return name.startswith("bsr:") or name.startswith("bsr+csr:")


class Functions(Mapping[str, Function]):
    """Name -> :class:`Function`; unknown names raise :class:`UnknownFunctionError`."""

    def __init__(self, functions: dict[str, Function], uncallable: dict[str, str]) -> None:
        self._functions = functions
        #: public functions Python cannot call (no Python form of their types): name -> why
        self.uncallable = uncallable

    def __getitem__(self, name: str) -> Function:
        if name not in self._functions:
            why = self.uncallable.get(name)
            note = f"; '{name}' is not callable from Python: {why}" if why else ""
            raise UnknownFunctionError(
                f"no public function '{name}'; the kernel has {_names(self._functions)}{note}"
            )
        return self._functions[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)


class Executable:
    """A loaded kernel library: ``exe(*args)``, ``exe.<name>(*args)``, ``exe.functions``.

    Attributes: ``directory`` it was loaded from, its parsed ``manifest``,
    ``functions`` (name -> :class:`Function`), and ``libraries``: the paths
    of the runtime libraries loaded before it (``needs``). A program built
    for a CPU and a GPU (:mod:`sparsecomp.compiler.parts`) is the CPU's part
    with ``parts`` (the CUDA target's name -> that device's part): its
    ``functions`` are every part's, each called on its own device.
    ``exe(*args)`` calls the only public function; with several, name one.
    A function whose name clashes with an attribute (``save``...) is
    reached through ``functions``.
    """

    def __init__(
        self,
        directory: Path,
        manifest: dict[str, Any],
        functions: dict[str, Function],
        needed: list[Path],
        uncallable: dict[str, str] | None = None,
    ) -> None:
        self.directory = directory
        self.manifest = manifest
        self.functions = Functions(functions, uncallable or {})
        self.libraries = needed
        self._only = next(iter(functions.values())) if len(functions) == 1 else None
        self._recompile: Recompile | None = None
        #: the options it was compiled with (``sparsecomp.compile``'s keywords; empty for
        #: a loaded executable)
        self.compile_options: dict[str, Any] = {}
        #: the other parts of a program built for several devices (compiler/parts.py):
        #: the target's name -> the part, whose functions are also this executable's
        self.parts: dict[str, Executable] = {}
        self._part_of: dict[str, Executable] = {}
        #: functions cut into parts that run on different devices, called in turn
        #: (:mod:`.chain`): name -> the function
        self.chains: dict[str, ChainFunction] = {}

    def __reduce__(self) -> str | tuple[Any, ...]:
        """Pickled as its directory: unpickled (a ``spawn`` pool's worker, another
        process), it is ``sparsecomp.load(directory)``, without the variants a
        compiled executable makes (other layouts, index widths, sizes)."""
        return (load, (str(self.directory),))

    def __copy__(self) -> Executable:
        return self  # a handle on a loaded library: copies share it

    def __deepcopy__(self, memo: dict[int, Any]) -> Executable:
        return self

    def _add_part(self, target: str, part: Executable) -> None:
        """Take the functions of ``part``, the executable of another device's functions."""
        self.parts[target] = part
        functions = self.functions
        for name, function in part.functions.items():
            functions._functions[name] = function
            self._part_of[name] = part
        functions.uncallable.update(part.functions.uncallable)
        every = list(functions.values())
        self._only = every[0] if len(every) == 1 else None

    def _add_chains(self, chains: dict[str, Any]) -> None:
        """The functions cut into parts (the manifest's ``chains``)."""
        devices = {}
        for name in self.functions:
            manifest = self._manifest_of(name)
            devices[name] = manifest.get("device") or manifest.get("emulates") or "host"
        for name, entry in chains.items():
            self.chains[name] = ChainFunction(name, entry, self.functions, devices)
        if len(self.chains) == 1:
            (only,) = self.chains.values()
            if {p for p, _ in only.parts} == set(self.functions):
                self._only = only  # type: ignore[assignment]

    def _manifest_of(self, function: str) -> dict[str, Any]:
        """The manifest of the part that holds ``function``."""
        part = self._part_of.get(function)
        return part.manifest if part is not None else self.manifest

    @property
    def recompile(self) -> Recompile | None:
        """Compiles this program with sparse arguments in other layouts, and dense sizes
        static: ``(function, {argument: layout attribute text}[, {argument: {dimension:
        size}}]) -> Executable``. Set by ``sparsecomp.compile`` (which also gives each
        function its :class:`~.specialize.Specializer` and, on the CPU, its
        :class:`~.specialize.SizeSpecializer`; not for ``profile=True`` builds, whose
        counters are the library's own); None for a loaded directory (no source,
        perhaps no MLIR)."""
        return self._recompile

    @recompile.setter
    def recompile(self, recompile: Recompile | None) -> None:
        self._recompile = recompile
        for function in self.functions.values():
            manifest = self._manifest_of(function.name)
            host = manifest.get("device", "host") in ("", "host")
            function.specializer = function.sizes = None
            function.make_destinations = function._destinations = None
            if recompile is None or manifest.get("profile"):
                continue  # a variant would run outside the library profile() counts in
            if any(function.name == p for c in self.chains.values() for p, _ in c.parts):
                continue  # a part of a cut function: not a function of the source
            name = function.name

            def variant(
                rules: Mapping[int, str], guards: tuple[int, ...], name: str = name
            ) -> Function:
                assert self._recompile is not None
                return self._recompile(name, rules, None, guards).functions[name]

            def resized(sizes: Mapping[int, Mapping[int, int]], name: str = name) -> Function:
                assert self._recompile is not None
                sized = self._recompile(name, {}, sizes)
                host_only = f"in '{name}': {HOST_ONLY}"
                if any(host_only in r for r in sized.remarks) and not any(
                    host_only in r for r in self.remarks
                ):  # a BSR product's partial blocks with a static K: the mapping refused
                    raise SparsecompError(
                        "its loops would stay in host code, where this build launches them"
                    )
                return sized.functions[name]

            def into(
                destinations: Mapping[int, int | None], name: str = name
            ) -> tuple[Function, Signature]:
                assert self._recompile is not None
                found = self._recompile(name, {}, None, (), destinations).functions[name]
                return found, found.signature

            function.specializer = Specializer(function.signature, variant, guard=host)
            function.make_destinations = into if host else None
            if host and static_candidates(function.signature):
                function.sizes = SizeSpecializer(function.signature, resized)

    def __call__(self, *args: Any, out: Any = None) -> Any:
        if self._only is None:
            raise SparsecompError(
                f"the kernel has {len(self.functions)} public functions, {_names(self.functions)}",
                hint="call one by name: exe.<name>(...) or exe.functions[name](...)",
            )
        return self._only(*args, out=out)

    def __getattr__(self, name: str) -> Function:
        functions = self.__dict__.get("functions")
        if name.startswith("_") or functions is None:
            raise AttributeError(name)
        chains = self.__dict__.get("chains") or {}
        if name in chains:
            return chains[name]
        return functions[name]

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self.functions, *self.chains})

    def profile(self, *args: Any, max_records: int = MAX_RECORDS) -> Profile:
        """:meth:`Function.profile` of the only public function."""
        if self._only is None:
            raise SparsecompError(
                f"profile() needs one public function; use exe.functions[name].profile(...) "
                f"({_names(self.functions)})"
            )
        return self._only.profile(*args, max_records=max_records)

    def prepare(
        self,
        A: Any,
        layout: str | None = None,
        *,
        function: str | None = None,
        k: int = 64,
        balance: str | None = None,
    ) -> Prepared:
        """``A`` packed once in the layout chosen for a function (see
        :mod:`sparsecomp.runtime.prepared`): ``exe(exe.prepare(A), B)`` runs the variant
        for that layout with no per-call conversion.

        ``layout`` forces one (a name ``SparseTensor.from_scipy`` accepts); else
        :func:`sparsecomp.formats.choose` picks it for the function's op (SpMM, SpMV
        or SDDMM, told from its signature) with ``k`` dense columns (the GPU's model
        for a ``cuda:sm_XX`` executable, and for a ``cuda-emu:sm_XX`` one, which runs
        that GPU's schedule), and the ``sparsecomp`` logger says what it
        chose and why (``Prepared.choice``). The
        variant is compiled on first need (needs the executable's source: one from
        ``sparsecomp.compile``) and cached like any kernel.

        On a GPU (``cuda:`` and ``cuda-emu:`` executables), a CSR SpMV, SpMM or SDDMM also
        gets its schedule chosen for the matrix (``Prepared.balance``: by rows, or
        its entries split evenly where the row lengths vary widely,
        :mod:`sparsecomp.formats.gpu_balance`), unless the executable was compiled
        with ``gpu_balance``; ``balance="rows"`` or ``"nonzeros"`` forces one. An f32
        function's BSR choice multiplies its blocks on the tensor cores as tf32 (unless
        compiled with ``gpu_tf32=False``), and the choice's ``why`` says so.
        """
        if function is None:
            if self._only is None:
                raise SparsecompError(
                    f"prepare() needs function=<name>: the kernel has {_names(self.functions)}"
                )
            target = self._only
        else:
            target = self.functions[function]
        own = target.signature

        manifest = self._manifest_of(own.name)
        own_balance = manifest.get("gpu_balance") or self.compile_options.get("gpu_balance", "rows")

        def variant_for(name: str, schedule: str | None = None) -> Function:
            _, argument = infer_op(own)
            declared = own.args[argument].layout
            same = schedule in (None, own_balance)
            if (
                same
                and declared is not None
                and declared.attr_text() == parse_layout(name).attr_text()
            ):
                return target
            if self.recompile is None:
                what = f"layout {name}" + ("" if same else f" with gpu_balance={schedule!r}")
                raise SparsecompError(
                    f"this executable was loaded from {self.directory}: it cannot compile "
                    f"'{own.name}' for {what}",
                    hint="compile it with sparsecomp.compile(source) to prepare other layouts",
                )
            attr = parse_layout(name).attr_text()
            options = None if same else {"gpu_balance": schedule}
            return self.recompile(own.name, {argument: attr}, schedule=options).functions[own.name]

        given = "forced"
        if layout is None and self.recompile is None:  # loaded: its own layout or none
            declared = own.args[infer_op(own)[1]].layout
            if declared is not None:
                layout = declared.attr_text()
                given = "a loaded executable's own layout: it compiles no other"
                LOG.info(
                    "sparsecomp: %s: a loaded executable compiles no variants; prepared in "
                    "its own layout %s",
                    own.name,
                    declared,
                )
        device = manifest.get("device") or manifest.get("emulates") or "host"
        if balance is not None and device == "host":
            raise SparsecompError(
                "prepare(balance=...) chooses a GPU schedule; this executable runs on the CPU"
            )
        if balance is None and ("gpu_balance" in self.compile_options or self.recompile is None):
            balance = own_balance  # the user's choice, or all a loaded executable has
        prepared = prepare(own, A, layout, k, variant_for, device, balance)
        prepared = dataclasses.replace(prepared, given=given)
        choice = prepared.choice
        tf32 = self.compile_options.get("gpu_tf32", True)
        if choice is not None and device != "host" and tf32 and _runs_tf32(own, prepared):
            # the kernel compiled for a CSR argument ran f32 FMAs; this layout's block
            # products run on the tensor cores (an error about 1000x f32's)
            note = ("its block products run on the tensor cores as tf32 (10-bit mantissas; "
                    "compile with gpu_tf32=False to keep f32)")  # fmt: skip
            LOG.info("sparsecomp: %s: %s: %s", own.name, prepared.layout, note)
            prepared = dataclasses.replace(
                prepared, choice=dataclasses.replace(choice, why=f"{choice.why}; {note}")
            )
        return dataclasses.replace(prepared, owner=target.family or str(target.directory))

    @property
    def remarks(self) -> tuple[str, ...]:
        """What the compile remarked, located (``file:line:col: remark: ...``): a GPU
        build's function whose loops all stay in host code, or a loop of one whose
        arithmetic does, a product the tensor cores do not take. The compile logs each
        at INFO; ``sparsecomp-compile`` prints them."""
        manifests = [self.manifest, *(part.manifest for part in self.parts.values())]
        return tuple(dict.fromkeys(r for m in manifests for r in m.get("remarks", [])))

    def plan(self) -> Plan:
        """The layout conversions the program runs, in program order, and, for a program
        built for several devices, the data that crosses to a GPU at each call of its
        functions; ``print`` it for the report (location, function, the two layouts,
        the bytes of the tensor built)."""
        found = list(self.manifest.get("conversions", []))
        transfers = []
        for part in self.parts.values():
            found += part.manifest.get("conversions", [])
            device = part.manifest.get("device") or part.manifest.get("emulates", "")
            emulated = "emulates" in part.manifest
            transfers += [Transfer(name, device, emulated) for name in part.functions]
        cut = tuple((c.name, tuple(c.parts)) for c in self.chains.values())
        between = [c for chain in self.chains.values() for c in chain.conversions()]
        conversions = (*(Conversion.from_json(c) for c in found), *between)
        return Plan(conversions, tuple(transfers), cut)

    def save(self, directory: str | Path) -> Path:
        """Copy the library, manifest, runtime libraries and stage IR to ``directory``.

        Stage IR files are the ``*.mlir`` and ``*.ll`` files beside the
        library; a CUDA executable also has its kernels' ``*.ptx`` and
        ``*.cubin`` files. Returns ``directory``; saving onto the loaded directory
        changes nothing. Each file replaces the old one by a rename (the manifest
        last), so that processes running the kernel saved there before keep
        running it (:func:`.loader.write_files`).
        """
        dest = Path(directory)
        try:
            dest.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file of that name, no permission, ...
            why = "it is a file" if dest.is_file() else exc.strerror
            raise SparsecompError(f"cannot save the executable to {dest}: {why}") from None
        if dest.resolve() == self.directory.resolve():
            return dest
        for entry in self.manifest.get("parts", []):  # before the manifest that lists them
            self.parts[entry["target"]].save(dest / entry["directory"])
        files = [self.directory / self.manifest["library"], self.directory / MANIFEST]
        stages = [p for ext in _STAGE_SUFFIXES for p in self.directory.glob(f"*{ext}")]
        files += sorted(stages) + self.libraries
        replaced = _saved_stages(dest)  # an earlier save's stage files: gone after this one
        # the manifest last: a reader sees it once the files it describes are in place;
        # it records the runtime libraries' digests (a damaged copy is refused at load)
        staged = dest / f".{MANIFEST}.{os.getpid()}.staged"
        ordered = [*(f for f in files if f.name != MANIFEST), staged]
        try:
            runtimes = {lib.name: loader.digest(lib.read_bytes()) for lib in self.libraries}
            manifest = json.loads((self.directory / MANIFEST).read_text())
            names = sorted(p.name for p in stages)
            saved = {**manifest, "runtime_sha256": runtimes, "saved_stages": names}
            staged.write_text(loader.manifest_text(saved))
            copies = [(path, dest / path.name) for path in ordered[:-1]]
            loader.write_files([*copies, (staged, dest / MANIFEST)])
            for name in replaced - set(names):  # another kernel's PTX is not this one's
                (dest / name).unlink(missing_ok=True)
        except FileNotFoundError as exc:
            raise SparsecompError(
                f"cannot save the executable to {dest}: {exc.filename} is gone (was "
                f"{self.directory} removed since it was loaded? another process cleaning "
                "the compile cache does that)",
                hint="compile it again (sparsecomp.compile) and save that",
            ) from None
        except OSError as exc:
            raise SparsecompError(f"cannot save the executable to {dest}: {exc}") from None
        finally:
            staged.unlink(missing_ok=True)
        return dest

    def __repr__(self) -> str:
        lines = [f"  {f.signature.describe()}" for f in self.functions.values()]
        lines += [f"  {c.describe()}" for c in self.chains.values()]
        head = f"Executable('{self.directory}', {len(lines)} function(s)"
        return "\n".join([f"{head}:", *lines]) + ")" if lines else head + ")"


def _saved_stages(directory: Path) -> set[str]:
    """The stage files (IR, PTX, cubin) an earlier :meth:`Executable.save` wrote to
    ``directory``, as its manifest lists them; none where it lists none (a file there
    that no save wrote is never removed)."""
    try:
        names = json.loads((directory / MANIFEST).read_text()).get("saved_stages", [])
    except (OSError, ValueError, AttributeError):
        return set()
    if not isinstance(names, list):
        return set()
    return {
        n
        for n in names
        if isinstance(n, str) and n == Path(n).name and Path(n).suffix in _STAGE_SUFFIXES
    }


def _loaded_function(directory: str, name: str) -> Function:
    """Function ``name`` of the executable in ``directory`` (how a Function unpickles)."""
    return load(directory).functions[name]


def load(directory: str | Path) -> Executable:
    """Load the kernel in ``directory`` (``manifest.json`` + its library); imports no MLIR.

    The library is loaded from a private copy of its checked bytes
    (:mod:`.loader`): another process saving into ``directory`` meanwhile
    can make this an error, never a crash.
    """
    path = Path(directory)
    manifest = read_manifest(path)
    entries = manifest["functions"]
    _check_host(path, manifest)
    uncallable = {n: why for n, e in entries.items() if (why := uncallable_reason(e)) is not None}
    signatures = [parse_signature(n, e) for n, e in entries.items() if n not in uncallable]
    saved = manifest.get("runtime_sha256")
    saved = saved if isinstance(saved, dict) else {}
    needed = [
        loader.runtime(name, [*_local_copy(path, name), library_path(name)], saved)
        for name in manifest.get("needs", [])
    ]
    library = loader.kernel(path / manifest["library"], manifest.get("library_sha256"))
    for sig in signatures:
        if not hasattr(library, sig.symbol):
            raise SparsecompError(f"{path / manifest['library']} has no symbol '{sig.symbol}'")
    make_caller: Callable[[ctypes.CDLL, Signature], Caller] = Caller
    if manifest.get("device", "").startswith("cuda:"):
        from sparsecomp.runtime.cuda import CudaCaller

        make_caller = functools.partial(CudaCaller, directory=path, manifest=manifest)
    functions = {sig.name: Function(library, sig, make_caller, path) for sig in signatures}
    exe = Executable(path, manifest, functions, needed, uncallable)
    for entry in manifest.get("parts", []):  # a program built for several devices
        exe._add_part(entry["target"], load(path / entry["directory"]))
    if manifest.get("chains"):
        exe._add_chains(manifest["chains"])
    return exe


@functools.cache
def _host() -> CpuTarget:
    return detect_host()


def _check_host(path: Path, manifest: dict[str, Any]) -> None:
    """A clear error now, not SIGILL later, where this machine cannot run the library's code.

    The library's shared code needs ``manifest["target"]``; a function with a
    ``target`` of its own also needs that one of ``manifest["targets"]``.
    """
    host = _host()
    needs: dict[str, list[str]] = {}  # target text -> what needs it
    if "target" in manifest:
        needs.setdefault(manifest["target"], []).append("its shared code")
    targets = manifest.get("targets", {})
    for name, entry in manifest["functions"].items():
        if (own := entry.get("target")) in targets:
            needs.setdefault(targets[own], []).append(f"'{name}' (target '{own}')")
    problems = []
    for text, users in needs.items():
        try:
            target = target_from_attr(text)
        except SparsecompError as err:
            raise SparsecompError(f"{path / MANIFEST}: invalid target {text}: {err}") from None
        if isinstance(target, CpuTarget) and (missing := target.missing_on(host)):
            problems.append(f"{', '.join(users)} need {', '.join(missing)} ({text})")
    if problems:
        raise TargetError(
            f"{path} cannot run on this machine ({host.attr_text()}): " + "; ".join(problems),
            hint="compile for this machine (target='host') or load it where those features exist",
        )


def read_manifest(directory: Path) -> dict[str, Any]:
    """The parsed ``manifest.json`` of a kernel directory, with its required keys checked."""
    file = directory / MANIFEST
    try:
        manifest = json.loads(file.read_text())
    except (FileNotFoundError, NotADirectoryError):
        raise SparsecompError(f"{directory} is not a compiled kernel: no {MANIFEST}") from None
    except json.JSONDecodeError as err:
        raise SparsecompError(f"{file} is not valid JSON: {err}") from None
    except UnicodeDecodeError as err:
        raise SparsecompError(f"{file} is not text (UTF-8): {err.reason}") from None
    except OSError as err:
        raise SparsecompError(f"cannot read {file}: {err.strerror}") from None
    if isinstance(manifest, dict) and (damage := loader.manifest_damage(manifest)):
        raise SparsecompError(f"{file}: {damage}", hint="compile the program and save it again")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else manifest
        raise SparsecompError(f"{file}: unsupported manifest format {got!r}, expected {FORMAT}")
    if not isinstance(manifest.get("library"), str) or not isinstance(
        manifest.get("functions"), dict
    ):
        raise SparsecompError(f"{file} needs a 'library' name and a 'functions' object")
    needs = manifest.get("needs", [])
    if not isinstance(needs, list) or not all(isinstance(n, str) for n in needs):
        raise SparsecompError(f"{file}: 'needs' must be a list of library names")
    return manifest


def _local_copy(directory: Path, name: str) -> list[Path]:
    """The copy of runtime library ``name`` saved beside a kernel, if it is there."""
    if name in LIBRARIES:
        local = directory / Path(LIBRARIES[name][1]).name
        if local.is_file():
            return [local]
    return []


def _names(functions: Mapping[str, Any]) -> str:
    return ", ".join(f"'{n}'" for n in functions) or "none"
