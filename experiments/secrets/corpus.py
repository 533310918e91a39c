"""The corpora of experiments/secrets: secret shapes with fake but well-formed values, and
ordinary notes that talk about tokens, headers and CI permissions. Generated from a seeded
random source: no value here was ever a credential.

    .venv/bin/python experiments/secrets/corpus.py [--seed 7] [--tiny]   # prints the counts

- `secret_shapes(rng)`: (name, text, secrets) - a text holding each shape, as a person pastes
  it, and the values that must never be stored or pushed.
- `variants(shape)`: each shape plain, base64-wrapped (`base64` prints 76 columns a line) and
  split across lines (each secret broken at its middle, as a terminal or an editor wraps a
  long line); each with the strings whose presence means a leak.
- `tokens(rng)` / `in_prose(token)`: the token shapes alone, for the push check's miss rate.
- `ordinary_notes()`: notes a person writes about tokens without holding one, for its false
  positive rate.
"""

from __future__ import annotations

import base64
import json
import random
import string
import sys
from typing import NamedTuple

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
UPPER_DIGITS = string.ascii_uppercase + string.digits
BASE64 = ALNUM + "+/"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


class Shape(NamedTuple):
    name: str
    text: str
    secrets: tuple[str, ...]


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    """`n` random characters with a digit, a capital and a small letter among them where the
    alphabet has them (a value with none of one kind reads as a placeholder, not a token)."""
    kinds = (string.digits, string.ascii_uppercase, string.ascii_lowercase)
    wanted = [set(k) & set(alphabet) for k in kinds if set(k) & set(alphabet)]
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(n))
        if all(set(value) & w for w in wanted):
            return value


def _pem(rng: random.Random, kind: str = "RSA PRIVATE KEY") -> tuple[str, str]:
    body_lines = [_r(rng, BASE64, 64) for _ in range(6)] + [_r(rng, BASE64, 20) + "=="]
    body = "\n".join(body_lines)
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----", body


def tokens(rng: random.Random) -> dict[str, str]:
    """One fake, well-formed value of each token shape the push check must refuse."""
    return {
        "github-pat": "ghp_" + _r(rng, ALNUM, 36),
        "github-fine-grained": "github_pat_" + _r(rng, ALNUM, 22) + "_" + _r(rng, ALNUM, 59),
        "gitlab-pat": "glpat-" + _r(rng, ALNUM, 20),
        "aws-access-key-id": "AKIA" + _r(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16),
        "openai": "sk-proj-" + _r(rng, ALNUM, 48),
        "anthropic": "sk-ant-api03-" + _r(rng, ALNUM + "_-", 93) + "AA",
        "slack-bot": "xoxb-"
        + _r(rng, string.digits, 12)
        + "-"
        + _r(rng, string.digits, 13)
        + "-"
        + _r(rng, ALNUM, 24),
        "slack-webhook": "https://hooks.slack.com/services/T"
        + _r(rng, UPPER_DIGITS, 8)
        + "/B"
        + _r(rng, UPPER_DIGITS, 10)
        + "/"
        + _r(rng, ALNUM, 24),
        "stripe-live": "sk_live_" + _r(rng, ALNUM, 24),
        "google-api-key": "AIza" + _r(rng, ALNUM + "_-", 35),
        "npm": "npm_" + _r(rng, ALNUM, 36),
        "huggingface": "hf_" + _r(rng, ALNUM, 34),
        "pypi": "pypi-AgEIcHlwaS5vcmc" + _r(rng, ALNUM + "_-", 70),
        "vault": "hvs." + _r(rng, ALNUM + "_-", 91),
        "docker-hub": "dckr_pat_" + _r(rng, ALNUM + "_-", 27),
        "sendgrid": "SG." + _r(rng, ALNUM + "_-", 22) + "." + _r(rng, ALNUM + "_-", 43),
        "age": "AGE-SECRET-KEY-1" + _r(rng, BECH32, 58),
        "twilio": "SK" + _r(rng, HEX, 32),
        "shopify": "shpat_" + _r(rng, HEX, 32),
        "digitalocean": "dop_v1_" + _r(rng, HEX, 64),
        "databricks": "dapi" + _r(rng, HEX, 32),
        "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
        + base64.urlsafe_b64encode(
            json.dumps(
                {"sub": _r(rng, string.digits, 10), "name": "ci", "iat": 1730000000}
            ).encode()
        )
        .decode()
        .rstrip("=")
        + "."
        + _r(rng, ALNUM + "_-", 43),
    }


def in_prose(name: str, token: str) -> str:
    return (
        f"Deploys started failing on Monday. The {name} credential in the runner was "
        f"{token} and it had expired; a new one is in the vault now."
    )


def secret_shapes(rng: random.Random) -> list[Shape]:
    """Each shape as a person pastes it, with the values that must not be stored."""
    t = tokens(rng)
    out = [
        Shape(f"token {k}", f"The CI uses `{v}` for the release job.", (v.rsplit("/", 1)[-1],))
        for k, v in t.items()
    ]  # (the webhook's secret is its path's last part)
    key_id, secret = t["aws-access-key-id"], _r(rng, BASE64, 40)
    password = _r(rng, ALNUM, 10) + "#!"
    out.append(
        Shape(
            "aws console credentials.csv",
            "User name,Password,Access key ID,Secret access key,Console login link\n"
            f"ci-deploy,{password},{key_id},{secret},"
            "https://123456789012.signin.aws.amazon.com/console\n",
            (password, key_id, secret),
        )
    )
    key_id2, secret2 = "AKIA" + _r(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16), _r(rng, BASE64, 40)
    out.append(Shape("aws key id then secret", f"{key_id2} {secret2}\n", (key_id2, secret2)))
    key_id3, secret3 = "AKIA" + _r(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16), _r(rng, BASE64, 40)
    out.append(
        Shape(
            "aws access keys csv",
            f"Access key ID,Secret access key\n{key_id3},{secret3}\n",
            (key_id3, secret3),
        )
    )
    pypi = "pypi-AgEIcHlwaS5vcmc" + _r(rng, ALNUM + "_-", 70)
    out.append(Shape("twine upload", f"twine upload -u __token__ -p {pypi} dist/*\n", (pypi,)))
    pem, body = _pem(rng, "PRIVATE KEY")
    key_id_hex = _r(rng, HEX, 40)
    account = {
        "type": "service_account",
        "project_id": "ledger-prod",
        "private_key_id": key_id_hex,
        "private_key": pem + "\n",
        "client_email": "deploy@ledger-prod.iam.gserviceaccount.com",
        "client_id": _r(rng, string.digits, 21),
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    out.append(
        Shape(
            "gcp service-account json",
            json.dumps(account, indent=2) + "\n",
            (key_id_hex, *(line.rstrip("=") for line in body.split("\n"))),
        )
    )
    pem2, body2 = _pem(rng, "OPENSSH PRIVATE KEY")
    out.append(
        Shape(
            "openssh private key",
            pem2 + "\n",
            tuple(line.rstrip("=") for line in body2.split("\n")),
        )
    )
    db_pw, secret_key, stripe = (
        _r(rng, ALNUM, 16),
        _r(rng, ALNUM, 50),
        "sk_live_" + _r(rng, ALNUM, 24),
    )
    out.append(
        Shape(
            ".env dump",
            f"DATABASE_URL=postgres://app:{db_pw}@db.internal:5432/ledger\n"
            f"SECRET_KEY={secret_key}\nSTRIPE_API_KEY={stripe}\nDEBUG=false\nPORT=8080\n",
            (db_pw, secret_key, stripe),
        )
    )
    url_pw = _r(rng, ALNUM, 14)
    out.append(
        Shape(
            "credentialed url",
            f"git clone https://deploy:{url_pw}@git.example.org/ledger.git\n",
            (url_pw,),
        )
    )
    tg = _r(rng, string.digits, 10) + ":AA" + _r(rng, ALNUM + "_-", 33)
    out.append(Shape("telegram bot token", f"TELEGRAM_BOT_TOKEN={tg}\n", (tg,)))
    return out


def _split(text: str, secret: str) -> str:
    """`secret` broken at its middle by a line break, where it stands in `text`."""
    half = len(secret) // 2
    return text.replace(secret, secret[:half] + "\n" + secret[half:])


def variants(shape: Shape) -> list[tuple[str, str, tuple[str, ...]]]:
    """(variant, text, what must not be stored): plain, base64-wrapped, split across lines.
    A leak is any of these strings found whole, or (`leaked`) a 12-character piece of one."""
    encoded = base64.encodebytes(shape.text.encode()).decode()  # 76 columns a line
    lines = tuple(line for line in encoded.splitlines() if len(line) >= 12)
    split = shape.text
    pieces: list[str] = []
    for secret in shape.secrets:
        if len(secret) >= 8:
            split = _split(split, secret)
            half = len(secret) // 2
            pieces += [secret[:half], secret[half:]]
        else:
            pieces.append(secret)
    return [
        ("plain", shape.text, shape.secrets),
        ("base64", f"The old runner's config, as `base64` printed it:\n{encoded}\n", lines),
        ("split", split, tuple(pieces)),
    ]


def leaked(stored: str, secrets: tuple[str, ...], piece: int = 12) -> list[str]:
    """The secrets of which `stored` holds the whole or a `piece`-character part."""
    out = []
    for secret in secrets:
        n = min(piece, len(secret))
        if any(secret[i : i + n] in stored for i in range(len(secret) - n + 1)):
            out.append(secret)
    return out


def ordinary_notes() -> list[tuple[str, str]]:
    """(name, text): notes about tokens, headers and CI permissions that hold no secret."""
    return [
        (
            "gha id-token",
            "```yaml\npermissions:\n  id-token: write\n  contents: read\n```\n"
            "OIDC to AWS needs `id-token: write`; no long-lived keys in the repository.",
        ),
        (
            "gha secrets ref",
            "```yaml\nenv:\n  GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}\n"
            "  NPM_TOKEN: ${{ secrets.NPM_TOKEN }}\n```",
        ),
        (
            "bearer placeholder",
            "Every call sends `Authorization: Bearer <token>`; a 401 means the token expired.",
        ),
        (
            "bearer variable",
            'curl -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.com/user',
        ),
        (
            "bearer env braces",
            "fetch(url, {headers: {Authorization: `Bearer ${process.env.API_TOKEN}`}})",
        ),
        ("basic doc", "Basic auth is `Authorization: Basic base64(user:password)`; never log it."),
        (
            "token header gh",
            'curl -H "Authorization: token ${{ secrets.GH_PAT }}" '
            "https://api.github.com/repos/acme/ledger",
        ),
        ("password env ref", "DB_PASSWORD=${DB_PASSWORD}\nDB_USER=app\nDB_HOST=db.internal"),
        (
            ".env.example",
            "SECRET_KEY=changeme\nDATABASE_URL=postgres://user:password@localhost/app\n"
            "API_TOKEN=your-token-here\nSTRIPE_KEY=sk_live_xxxxxxxxxxxxxxxxxxxxxxxx",
        ),
        (
            "k8s secretKeyRef",
            "```yaml\nenv:\n  - name: DB_PASSWORD\n    valueFrom:\n"
            "      secretKeyRef:\n        name: ledger-db\n        key: password\n```",
        ),
        (
            "aws docs example",
            "aws configure asks for the key id (e.g. AKIAIOSFODNN7EXAMPLE) and "
            "the secret (wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY in AWS's docs).",
        ),
        (
            "rotation policy",
            "Rotate the API key every 90 days; the token_ttl is 3600 and "
            "max_tokens stays at 4096. password_min_length = 12.",
        ),
        (
            "token in prose",
            "The token refresh failed because the refresh token had expired; "
            "the password reset mail went out at 9:00.",
        ),
        (
            "git sha",
            "Fixed in commit 3f9a1c2e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 (see the changelog).",
        ),
        (
            "uuid and digest",
            "Run id 550e8400-e29b-41d4-a716-446655440000, image digest "
            "sha256:9b2f0a8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a",
        ),
        (
            "npm integrity",
            '"integrity": "sha512-Z8z6yNi2oSx0Jq+0bWQZs3Fy4bqXx1Jt1m1q3gUq8v0Qd3mY'
            'l9Zb0K8x5m9F5nq3Wc2Ff6Vt1Lk8mTqZK3a7aA=="',
        ),
        (
            "token placeholders",
            "Tokens look like `ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx` or "
            "`sk-...`; paste yours into the keychain, never here.",
        ),
        ("mysql flags doc", "Connect with `mysql -u app -p` and type the password when asked."),
        ("twine doc", "Upload with `twine upload -u __token__ -p $PYPI_TOKEN dist/*`."),
        ("vault doc", "`vault login -method=oidc`; the token lands in ~/.vault-token."),
        (
            "docker login doc",
            "`docker login -u bob --password-stdin < token.txt` keeps the token "
            "out of the shell history.",
        ),
        (
            "jwt explained",
            "A JWT has three parts, header.payload.signature, each base64url; "
            '`eyJ` is how `{"` starts in base64.',
        ),
        (
            "settings table",
            "| setting | default |\n|---|---|\n| auth_type | oauth |\n"
            "| token_limit | 8192 |\n| secret_name | ledger-db |",
        ),
        (
            "connection string doc",
            "The URL is `postgres://USER:PASSWORD@HOST:5432/DB`; the "
            "password comes from the environment.",
        ),
        (
            "base64 of prose",
            "The fixture is `dGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZw==` "
            "(a sentence, base64).",
        ),
        ("hex dump", "First bytes: 89504e470d0a1a0a0000000d49484452 (a PNG header)."),
        (
            "ssh public key",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx1ZGdlci1kZXBsb3kta2V5LWZvci1jaQ "
            "deploy@ci (public: fine to share).",
        ),
        ("curl -u doc", "`curl -u USER:TOKEN https://api.example.com` - replace both."),
        ("cookie doc", "The session cookie is `Set-Cookie: session=<opaque>; HttpOnly; Secure`."),
        ("csv without secrets", "name,token_count,auth_type\nledger,120,oauth\nbilling,80,basic\n"),
    ]


def held_out_notes() -> list[tuple[str, str]]:
    """(name, text): more ordinary notes, written after the check was tuned on
    `ordinary_notes` and run once, untouched (the held-out rate of the experiment)."""
    return [
        (
            "gha oidc role",
            "- uses: aws-actions/configure-aws-credentials@v4\n  with:\n"
            "    role-to-assume: arn:aws:iam::123456789012:role/ci-deploy\n    aws-region: eu-west-1",
        ),
        (
            "gha permissions block",
            "permissions:\n  contents: write\n  pull-requests: write\n"
            "  id-token: write\n  packages: read",
        ),
        (
            "dependabot token",
            "Dependabot needs `GITHUB_TOKEN` with `contents: write`; a PAT only "
            "for cross-repo updates.",
        ),
        (
            "bearer in openapi",
            "securitySchemes:\n  bearerAuth:\n    type: http\n"
            "    scheme: bearer\n    bearerFormat: JWT",
        ),
        (
            "auth header python",
            'headers = {"Authorization": f"Bearer {os.environ[\'API_TOKEN\']}"}',
        ),
        ("auth header go", 'req.Header.Set("Authorization", "Bearer "+token)'),
        (
            "netrc doc",
            "`~/.netrc` holds `machine api.heroku.com login me password <api key>`; chmod 600 it.",
        ),
        ("vault path", "The deploy key lives at `secret/data/ci/deploy` in Vault (kv v2)."),
        (
            "sops note",
            "Secrets are encrypted with sops; `sops -d secrets.enc.yaml` needs the age "
            "key from 1Password.",
        ),
        (
            "password policy",
            "Passwords: 14 characters minimum, rotated yearly; the password field "
            "is `password_hash` (argon2id).",
        ),
        (
            "token bucket",
            "The rate limiter is a token bucket: capacity 100, refill 10 tokens a second.",
        ),
        (
            "llm tokens",
            "gpt-4o: 128k context tokens; set max_output_tokens=4096 and temperature=0.2.",
        ),
        ("csrf", "Django's CSRF token comes from `{% csrf_token %}`; the cookie is csrftoken."),
        (
            "secret manager ref",
            "DB_PASSWORD: arn:aws:secretsmanager:eu-west-1:123456789012:secret:ledger/db",
        ),
        (
            "k8s secret create",
            "`kubectl create secret generic ledger-db --from-env-file=.env` "
            "(the file stays on the laptop).",
        ),
        ("docker secret mount", "RUN --mount=type=secret,id=npmrc,target=/root/.npmrc npm ci"),
        ("terraform var", 'variable "db_password" {\n  type      = string\n  sensitive = true\n}'),
        (
            "helm values",
            "postgresql:\n  auth:\n    existingSecret: ledger-db\n"
            "    secretKeys:\n      adminPasswordKey: postgres-password",
        ),
        (
            "ssh fingerprint",
            "Host key fingerprint SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8 (ED25519).",
        ),
        ("gpg key id", "Commits are signed with key 3AA5C34371567BD2 (gpg --list-secret-keys)."),
        ("api key header doc", "Send the key as `X-Api-Key: <key>`; keys start with `lk_live_`."),
        (
            "stripe test doc",
            "In tests use Stripe's `sk_test_...` key from the dashboard; never `sk_live_`.",
        ),
        (
            "release checklist",
            "1. bump version\n2. `twine upload dist/*` (token from the keychain)\n3. tag and push",
        ),
        (
            "oauth flow",
            "The OAuth flow returns an access_token and a refresh_token; store the "
            "refresh token encrypted.",
        ),
        ("redis url template", "REDIS_URL=redis://:${REDIS_PASSWORD}@redis:6379/0"),
        (
            "sentry dsn doc",
            "SENTRY_DSN comes from the project's settings; the public key part is not secret.",
        ),
        (
            "commit list",
            "a1b2c3d fix token refresh\n9f8e7d6 rotate keys\n0badc0f password reset mail",
        ),
        (
            "base64 image",
            "The favicon is inlined: data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAB"
            "AAAAAQCAYAAAAf8/9hAAAAOklEQVR4nGNgGAWjYBSMglEwCkbBKBgFo2AUjIJRMApGwSgYBaNgFIyCUTAKRsEoGAWjYB"
            "SMglEwCkYBAO0xAAHjWn3sAAAAAElFTkSuQmCC",
        ),
        (
            "uuid list",
            "Tenant ids: 3f2504e0-4f89-11d3-9a0c-0305e82c3301, "
            "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
        ),
        (
            "error message",
            'Error: password authentication failed for user "ledger" (SQLSTATE '
            "28P01) - the pod read an old secret.",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tiny", action="store_true", help="the same (the corpus is small)")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    shapes = secret_shapes(rng)
    print(
        json.dumps(
            {
                "secret shapes": len(shapes),
                "variants": sum(len(variants(s)) for s in shapes),
                "tokens": len(tokens(rng)),
                "ordinary notes": len(ordinary_notes()),
                "held-out notes": len(held_out_notes()),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
