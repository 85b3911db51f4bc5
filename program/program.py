"""Programs: the unit Keel builds, runs, transforms and saves (a `ProgramDesc`)."""
from __future__ import annotations

from typing import Iterator

from google.protobuf.message import DecodeError

from keel.program.block import Block
from keel.program.errors import ParseError
from keel.program.variable import Parameter, Variable
from keel.proto import pb

# The file-format version PaddlePaddle 3.3.1 writes (3*10^6 + 3*10^3 + 1); files we write
# declare the op semantics of that release.
FILE_VERSION = 3003001


def block_structure_problems(parents: list[int]) -> list[str]:
    """What is wrong with a program's block tree, given each block's `parent_idx`: block 0
    must have no parent (-1); every other block's parent must be another existing block,
    and following parents from any block must reach block 0 (no cycle)."""
    problems = []
    n = len(parents)
    if n and parents[0] != -1:
        problems.append(f"block 0 is the global block and has no parent, but its parent_idx is {parents[0]}")
    for idx in range(1, n):
        parent = parents[idx]
        if parent == idx:
            problems.append(f"block {idx} is its own parent")
        elif not 0 <= parent < n:
            problems.append(f"block {idx} has parent {parent}, which does not exist "
                            f"(the program has blocks 0..{n - 1})")
    if problems:
        return problems
    # One walk per block up its parents, stopping at a block already settled: each block is
    # walked over once, so a deep chain costs linear time (a walk from every block to the root
    # was quadratic: 9 s for a 5,000-deep chain). A cycle is reported once, from the first
    # block that leads into it; the blocks on that walk are settled as broken.
    UNSEEN, REACHES_ROOT, BROKEN = 0, 1, 2
    state = [UNSEEN] * n
    if n:
        state[0] = REACHES_ROOT
    for idx in range(1, n):
        path: list[int] = []
        on_path: set[int] = set()
        block = idx
        while state[block] == UNSEEN and block not in on_path:
            path.append(block)
            on_path.add(block)
            block = parents[block]
        if block in on_path:
            problems.append(f"the parents of block {idx} form a cycle: "
                            + " -> ".join(map(str, path + [block])))
        outcome = REACHES_ROOT if state[block] == REACHES_ROOT and block not in on_path else BROKEN
        for visited in path:
            state[visited] = outcome
    return problems


def _non_text_fields(desc) -> list[str]:
    """Where a string field of the message holds bytes that are not UTF-8 (protobuf's
    Python runtime then returns `bytes`, which no name lookup or sort expects)."""
    found = []

    def check(value, where):
        if isinstance(value, bytes):
            found.append(f"{where} {value[:40]!r}")

    for pair in desc.op_version_map.pair:
        check(pair.op_name, "op_version_map op_name")
    for b, block in enumerate(desc.blocks):
        for var in block.vars:
            check(var.name, f"block {b} variable name")
        for i, op in enumerate(block.ops):
            where = f"block {b} op {i}"
            check(op.type, f"{where} type")
            for slots in (op.inputs, op.outputs):
                for slot in slots:
                    check(slot.parameter, f"{where} slot name")
                    for arg in slot.arguments:
                        check(arg, f"{where} slot {slot.parameter!r} argument")
            for a in op.attrs:
                check(a.name, f"{where} attribute name")
                check(a.s, f"{where} attribute {a.name!r}")
                check(a.var_name, f"{where} attribute {a.name!r}")
                for text in list(a.strings) + list(a.vars_name):
                    check(text, f"{where} attribute {a.name!r}")
    return found


class Program:
    """A list of blocks; block 0 is global. Python objects are views over protobuf messages
    kept verbatim, so `Program.parse_from_string(p.serialize_to_string()) == p` always holds
    and a parsed PaddlePaddle file re-serializes to an equal message.

    `revision` changes on every mutation (executors key their compiled plans on it).
    `random_seed` seeds the random initializer ops this program's layers create.

    Examples:
        >>> import keel.program as pg
        >>> main, startup = pg.Program(), pg.Program()
        >>> with pg.program_guard(main, startup):
        ...     x = pg.data("x", [-1, 4])
        ...     y = pg.nn.fc(x, 2)
        >>> [op.type for op in main.global_block().ops]
        ['mul', 'elementwise_add']
        >>> pg.Program.parse_from_string(main.serialize_to_string()) == main
        True
    """

    def __init__(self):
        from keel.program.op_versions import OP_VERSIONS

        self.header = pb.ProgramDesc()  # version, op_version_map, ...; blocks live in self.blocks
        self.header.version.version = FILE_VERSION
        for name, version in OP_VERSIONS:
            pair = self.header.op_version_map.pair.add()
            pair.op_name, pair.op_version.version = name, version
        self.blocks: list[Block] = [Block(self, pb.BlockDesc(idx=0, parent_idx=-1))]
        self.random_seed = 0
        self._revision = 0
        self._current_block_idx = 0
        self._op_role = 0  # OpRole of ops appended now: 0 forward, 1 backward, 2 optimize, ...
        self._namescopes: list[str] = []
        # LR variable name -> a callable giving its current value (an LRScheduler, or an
        # optimizer's get_lr after set_lr): the executor writes it before each run.
        self.lr_schedules: dict = {}
        # What reading a file written by an older PaddlePaddle changed (program/legacy.py).
        self.upgrade_notes: list[str] = []
        # Which rank keeps each parameter's optimizer state, where fleet shards it
        # (program/sharding.py); None: this program holds all of it.
        self.sharding = None

    # -- structure ----------------------------------------------------------------------
    @property
    def revision(self) -> int:
        return self._revision

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def global_block(self) -> Block:
        return self.blocks[0]

    def block(self, idx: int) -> Block:
        return self.blocks[idx]

    def current_block(self) -> Block:
        return self.blocks[self._current_block_idx]

    def create_block(self, parent_idx: int | None = None) -> Block:
        """Add a sub-block (for control-flow ops) and make it current until `rollback()`."""
        parent = self._current_block_idx if parent_idx is None else parent_idx
        block = Block(self, pb.BlockDesc(idx=len(self.blocks), parent_idx=parent))
        self.blocks.append(block)
        self._current_block_idx = block.idx
        self._revision += 1
        return block

    def rollback(self) -> None:
        self._current_block_idx = max(self.current_block().parent_idx, 0)

    def list_vars(self) -> Iterator[Variable]:
        for block in self.blocks:
            yield from block.vars.values()

    def all_parameters(self) -> list[Parameter]:
        return self.global_block().all_parameters()

    def _namescope(self) -> str:
        return "/" + "".join(s + "/" for s in self._namescopes)

    # -- serialization --------------------------------------------------------------------
    def to_desc(self) -> pb.ProgramDesc:
        desc = pb.ProgramDesc()
        desc.CopyFrom(self.header)
        desc.blocks.extend(b.to_desc() for b in self.blocks)
        return desc

    def serialize_to_string(self) -> bytes:
        return self.to_desc().SerializeToString()

    @classmethod
    def from_desc(cls, desc: pb.ProgramDesc, *, verify: bool = True, source: str = "program") -> "Program":
        """Wrap a ProgramDesc (copied, then kept verbatim). With `verify`, check that every
        op is known and every variable defined, reporting all problems at once."""
        bad_text = _non_text_fields(desc)
        if bad_text:
            raise ParseError(f"{source} is not a valid program file: text fields that are not UTF-8 "
                             f"({len(bad_text)}): {', '.join(bad_text[:5])}{' ...' if len(bad_text) > 5 else ''}")
        prog = cls.__new__(cls)
        prog.header = pb.ProgramDesc()
        prog.header.CopyFrom(desc)
        del prog.header.blocks[:]
        prog.blocks = []
        prog.random_seed = 0
        prog._revision = 0
        prog._current_block_idx = 0
        prog._op_role = 0
        prog._namescopes = []
        prog.lr_schedules = {}
        prog.upgrade_notes = []
        prog.sharding = None
        for i, bdesc in enumerate(desc.blocks):
            header = pb.BlockDesc()
            header.CopyFrom(bdesc)
            del header.vars[:]
            del header.ops[:]
            if header.idx != i:
                raise ParseError(f"{source}: block {i} says its index is {header.idx}")
            block = Block(prog, header)
            prog.blocks.append(block)
            for vdesc in bdesc.vars:
                v = pb.VarDesc()
                v.CopyFrom(vdesc)
                block._adopt_var(v)
            for odesc in bdesc.ops:
                o = pb.OpDesc()
                o.CopyFrom(odesc)
                block._adopt_op(o)
        if not prog.blocks:
            raise ParseError(f"{source}: the program has no blocks")
        problems = block_structure_problems([b.parent_idx for b in prog.blocks])
        if problems:
            # Nothing may walk the blocks before this holds: a parent cycle would loop forever.
            raise ParseError(f"{source}: the program's blocks do not form a tree rooted at block 0:\n  - "
                             + "\n  - ".join(problems))
        if verify:
            from keel.program.verify import verify_program
            verify_program(prog, source=source)
        return prog

    @classmethod
    def parse_from_string(cls, data: bytes, *, verify: bool = True, source: str = "program") -> "Program":
        """Parse ProgramDesc bytes (a `.pdmodel` file's content). A file written by an older
        PaddlePaddle is brought to the op semantics Keel implements first (program/legacy.py:
        attributes later op versions added, old formulas, the computations legacy fusion
        attributes ask for written out as ops; `upgrade_notes` lists the changes); a file
        from a later release warns (NewerFileWarning)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ParseError(f"{source}: expected bytes, got {type(data).__name__}")
        desc = pb.ProgramDesc()
        try:
            desc.ParseFromString(bytes(data))
        except (DecodeError, RuntimeError, ValueError) as e:
            raise ParseError(f"{source} is not a valid program file (ProgramDesc): {e}") from None
        missing = desc.FindInitializationErrors()
        if missing:
            raise ParseError(f"{source} is not a valid program file (ProgramDesc): missing required "
                             f"field(s) {', '.join(missing[:5])}")
        from keel.program import legacy
        prog = cls.from_desc(desc, verify=False, source=source)
        prog.upgrade_notes = legacy.upgrade_program(prog, source)
        if verify:
            from keel.program.verify import check_loaded
            check_loaded(prog, source)
        return prog

    def clone(self, for_test: bool = False) -> "Program":
        """A deep copy. `for_test=True` gives the evaluation program: forward ops only
        (backward and optimizer ops dropped) with `is_test` set on ops that have it."""
        from keel.program.clone import clone_program
        return clone_program(self, for_test)

    def verify(self) -> None:
        """Check the program (known ops, defined variables, attribute types); raises
        UnsupportedProgramError listing every problem."""
        from keel.program.verify import verify_program
        verify_program(self)

    # -- comparison and display -------------------------------------------------------------
    def __eq__(self, other):
        if not isinstance(other, Program):
            return NotImplemented
        return self.to_desc() == other.to_desc()

    __hash__ = object.__hash__

    def __str__(self):
        from keel.program.printer import format_program
        return format_program(self)

    def __repr__(self):
        n_ops = sum(len(b.ops) for b in self.blocks)
        return f"<Program: {len(self.blocks)} block(s), {n_ops} op(s), revision {self._revision}>"
