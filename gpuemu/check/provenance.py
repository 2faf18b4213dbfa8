"""What a check ran on: the git commit of the project and, in CI, the run, for the reports and the signed
statement ("these verdicts are of commit X, produced by CI run Y").

Read when a check finishes (never at import). Git is asked with ``git -C ROOT``; a folder that is not a
repository, or a machine without git, gives no ``git`` entry rather than an error.
"""

from __future__ import annotations

import os
import subprocess
from typing import Mapping


def git(root: str) -> dict:
    """``{"commit", "dirty", "ref"}`` of the repository holding ``root``; {} outside one.
    ``dirty``: tracked files differ from the commit (the verdicts may then be of code no commit holds)."""

    def ask(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = ask("rev-parse", "HEAD")
    if not commit:
        return {}
    status = ask("status", "--porcelain", "--untracked-files=no")
    ref = ask("rev-parse", "--abbrev-ref", "HEAD")
    return {"commit": commit, "dirty": bool(status), "ref": None if ref in (None, "HEAD") else ref}


def ci(env: Mapping[str, str] | None = None) -> dict:
    """The CI run this is, from the variables the CI service sets; {} outside CI."""
    env = os.environ if env is None else env
    if env.get("GITHUB_ACTIONS") == "true":
        server = env.get("GITHUB_SERVER_URL", "https://github.com")
        repo, run_id = env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
        return {k: v for k, v in {
            "provider": "github-actions", "repository": repo, "run_id": run_id,
            "run_attempt": env.get("GITHUB_RUN_ATTEMPT"), "workflow": env.get("GITHUB_WORKFLOW"),
            "job": env.get("GITHUB_JOB"), "event": env.get("GITHUB_EVENT_NAME"), "ref": env.get("GITHUB_REF"),
            "sha": env.get("GITHUB_SHA"),
            "run_url": f"{server}/{repo}/actions/runs/{run_id}" if repo and run_id else None,
        }.items() if v}
    if env.get("GITLAB_CI") == "true":
        return {k: v for k, v in {
            "provider": "gitlab-ci", "repository": env.get("CI_PROJECT_PATH"), "run_id": env.get("CI_PIPELINE_ID"),
            "job": env.get("CI_JOB_ID"), "ref": env.get("CI_COMMIT_REF_NAME"), "sha": env.get("CI_COMMIT_SHA"),
            "run_url": env.get("CI_PIPELINE_URL"),
        }.items() if v}
    if env.get("CI", "").lower() in ("true", "1"):
        return {"provider": "unknown"}
    return {}


def provenance(root: str, env: Mapping[str, str] | None = None) -> dict:
    """``{"git": ..., "ci": ...}``, each present only when known."""
    out = {}
    g, c = git(root), ci(env)
    if g:
        out["git"] = g
    if c:
        out["ci"] = c
    return out
