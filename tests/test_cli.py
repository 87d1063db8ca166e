from harness.spec.group import GroupSpec
from harness.spec.roles import ROLES


def test_modules_lists_every_transport_role_pair(harness):
    result = harness("modules")
    assert result.code == 0
    names = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("loop")]
    assert names == [f"loopback.{role}" for role in ROLES]


def test_run_help_documents_every_flag_with_its_default(harness):
    result = harness("run", "--help", output=False)
    assert result.code == 0
    text = result.stdout
    for flag in ("-nt", "-rt", "--rate", "-rl", "-mg", "-sw", "-ss", "-wi", "-rp", "-ms", "-mf",
                 "--property", "-pp", "-tx", "-cc", "-d", "--processes", "--poisson", "--crc",
                 "--group", "--broker-pid", "--drain", "-o"):
        assert flag in text, flag
    assert "[default: 256]" in text and "[default: 5.0]" in text


def test_group_spec_per_thread_rate():
    assert GroupSpec("loopback.Sender", rate=1000, threads=4, processes=5).per_thread_rate == 50
    assert GroupSpec("loopback.Sender", thread_rate=7).per_thread_rate == 7
