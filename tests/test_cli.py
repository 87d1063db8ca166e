from harness.modules.interface.roles import ROLES

from harness.plan.group import GroupSpec


def test_modules_lists_every_transport_role_pair(harness):
    result = harness("modules")
    assert result.code == 0
    names = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("loop")]
    assert names == [f"loopback.{role}" for role in ROLES]
    # Only the roles a transport plays: HTTP is the client's side of a request.
    assert [line.split()[0] for line in result.stdout.splitlines()
            if line.startswith("http.")] == ["http.Requestor"]


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


def test_help_texts_have_no_line_breaks_mid_sentence(harness):
    from harness.cli import app

    commands = [((c.name or c.callback.__name__,), c) for c in app.registered_commands]
    for group in app.registered_groups:
        commands += [((group.name, c.name), c) for c in group.typer_instance.registered_commands]
    for words, command in commands:
        text = " ".join((command.help or "").split())
        assert text, words
        done = harness(*words, "--help", output=False)
        assert done.code == 0, done.stderr
        # At 200 columns every summary fits on a line of its own: found whole on one line.
        first = text.split(". ")[0]
        assert any(first in line for line in done.stdout.splitlines()), (words, first)


def test_profiles_list_shows_each_first_sentence_whole(harness):
    from harness.experiments.profile import listing, shipped_dir

    done = harness("profiles", "list", output=False)
    assert done.code == 0, done.stderr
    flat = " ".join(done.stdout.split())
    for file, what in listing(shipped_dir()):
        assert what.endswith("."), (file.name, what)
        assert what in flat, (file.name, what)
