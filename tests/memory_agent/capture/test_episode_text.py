"""What an episode's document says of its steps (issue 29, experiments/sessions): paths under
the session's folder relative to it, a bookkeeping tool by its name alone, a step that comes
again shown once with its count - failures with another error line stay in their order."""

from memory_agent.capture.episodes import Episode, Step

ROOT = "/home/u/src/shop"


def test_steps_read_compactly():
    todo = '{"todos": [{"content": "fix the import", "status": "in_progress"}]}'
    episode = Episode("s1", 1, 0.0, "make the tests pass", cwd=ROOT)
    episode.steps = [
        Step("TodoWrite", todo, True),
        Step("Read", f"{ROOT}/app/models.py", True),
        Step("Bash", f"cd {ROOT} && pytest -q", False, "E   NameError: name 'os' is not defined"),
        Step("Edit", f"{ROOT}/app/models.py", True),
        Step("Edit", f"{ROOT}/app/models.py", True),
        Step("TodoWrite", todo, True),
        Step("Bash", f"cd {ROOT} && pytest -q", False, "E   ImportError: cannot import json"),
        Step("Edit", f"{ROOT}/app/models.py", True),
        Step("Bash", f"cd {ROOT} && pytest -q", True),
        Step("Read", "/etc/hosts", True),
    ]
    body = episode.to_document().body
    steps = body.split("Steps:\n", 1)[1].splitlines()
    assert steps == [
        "- TodoWrite → ok (×2)",
        "- Read: app/models.py → ok",
        "- Bash: cd . && pytest -q → failed: E   NameError: name 'os' is not defined",
        "- Edit: app/models.py → ok (×3)",
        "- Bash: cd . && pytest -q → failed: E   ImportError: cannot import json",
        "- Bash: cd . && pytest -q → ok",
        "- Read: /etc/hosts → ok",
    ]


def test_an_episode_without_a_folder_keeps_its_paths():
    episode = Episode("s1", 1, 0.0, "look at the config")
    episode.steps = [Step("Read", "/srv/app/config.toml", True)]
    assert "- Read: /srv/app/config.toml → ok" in episode.to_document().body
