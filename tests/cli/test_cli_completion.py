"""``tracefence completion bash|zsh|tcsh`` (issue 28, part 5): shtab's scripts from the command line's own parser,
every command and option in them; bash's script loads and completes in a real bash."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from cli_helpers import run

COMMANDS = ("plan", "review", "serve", "tools", "ui", "completion")


@pytest.mark.parametrize("shell", ["bash", "zsh", "tcsh"])
def test_the_script_names_every_command(shell):
    proc = run("completion", shell)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    for command in COMMANDS:
        assert command in proc.stdout
    if shell != "tcsh":  # shtab's tcsh script completes commands and choices, not options
        assert "--fail-on" in proc.stdout and "--rules-skeleton" in proc.stdout


def _complete(script: str, words: list[str]) -> list[str]:
    """What bash completes for ``words`` (the last one being typed), with the script loaded."""
    line = " ".join(words)
    program = (
        f"{script}\n"
        f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}\n"
        "_shtab_tracefence\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return sorted(filter(None, proc.stdout.splitlines()))


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on PATH")
def test_bash_completes_commands_options_and_choices():
    script = run("completion", "bash").stdout
    assert _complete(script, ["tracefence", "pl"]) == ["plan"]
    assert _complete(script, ["tracefence", "tools", "--form"]) == ["--format"]
    assert _complete(script, ["tracefence", "plan", "--fail-on", "re"]) == ["review"]


def test_an_unknown_shell_is_refused():
    proc = run("completion", "fish")
    assert proc.returncode == 2
    assert "invalid choice: 'fish'" in proc.stderr
