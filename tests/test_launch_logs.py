"""The launcher reads which rank ended a job from mpiexec's own report, in the words of
MPICH's hydra and of Open MPI's prterun (texts captured from real runs: mpich 4 and Open MPI
5.0.11 wheels, a rank SIGKILLed or exiting with code 3). No MPI is needed here."""
from __future__ import annotations

import pytest

from keel.distributed.launch import HOSTFILE_FLAG, death_in_log, flavor_of, read_hostfile, write_hostfile

HYDRA_KILLED = """
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 29979 RUNNING AT vm
=   EXIT CODE: 9
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)
This typically refers to a problem with your application.
Please see the FAQ page for debugging suggestions
"""

OPENMPI_KILLED = """--------------------------------------------------------------------------
prterun noticed that process rank 1 with PID 29753 on node vm exited on
signal 9 (Killed).
--------------------------------------------------------------------------
"""

OPENMPI_EXIT = """--------------------------------------------------------------------------
prterun detected that one or more processes exited with non-zero status,
thus causing the job to be terminated. The first process to do so was:

   Process name: [prterun-vm-29809@1,1]
   Exit code:    3
--------------------------------------------------------------------------
"""


def test_hydra_report_names_the_rank_by_its_pid():
    assert death_in_log(HYDRA_KILLED, {"29979": 1, "29978": 0}) == (1, "Killed (signal 9) (MPI: process 29979)")
    assert death_in_log(HYDRA_KILLED, {}) == (None, "Killed (signal 9) (MPI: process 29979)")


def test_open_mpi_reports_name_the_rank_itself():
    assert death_in_log(OPENMPI_KILLED, {}) == (1, "Killed (signal 9) (MPI: process 29753)")
    assert death_in_log(OPENMPI_EXIT, {}) == (1, "exit code 3 (MPI)")


def test_no_report_no_rank():
    assert death_in_log("", {}) == (None, "")
    assert death_in_log("hello from 0\n", {"1": 0}) == (None, "")


def test_the_flavor_from_mpiexec_version_picks_the_hostfile_flag():
    mpich = "HYDRA build details:\n    Version:                                 5.0.2\n"
    openmpi = "mpiexec (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/community/help/\n"
    assert HOSTFILE_FLAG[flavor_of(mpich)] == "-f"
    assert HOSTFILE_FLAG[flavor_of(openmpi)] == "--hostfile"


def test_a_hostfile_in_either_syntax_is_written_in_the_mpis_own(tmp_path):
    given = tmp_path / "hosts"
    given.write_text("# the machines\nnode1:4\nnode2 slots=2\nnode3   # slots: MPI's default\n\n")
    hosts = read_hostfile(str(given))
    assert hosts == [("node1", 4), ("node2", 2), ("node3", None)]
    write_hostfile(hosts, "mpich", tmp_path / "mpich")
    write_hostfile(hosts, "openmpi", tmp_path / "openmpi")
    assert (tmp_path / "mpich").read_text() == "node1:4\nnode2:2\nnode3\n"
    assert (tmp_path / "openmpi").read_text() == "node1 slots=4\nnode2 slots=2\nnode3\n"


@pytest.mark.parametrize("text, says", [("node1:four\n", "line 1: 'node1:four' is not"),
                                         ("\n# nothing\n", "lists no machine")])
def test_a_bad_hostfile_is_named_with_its_line(tmp_path, text, says):
    bad = tmp_path / "hosts"
    bad.write_text(text)
    with pytest.raises(SystemExit, match=says):
        read_hostfile(str(bad))
    with pytest.raises(SystemExit, match="cannot read the hostfile"):
        read_hostfile(str(tmp_path / "missing"))
