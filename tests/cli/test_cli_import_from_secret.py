"""`import pg-cron --from` with a URL libpq cannot read is refused in one line that does not quote its
password (no traceback)."""

from __future__ import annotations

from tests.support.cli import cli


def test_a_bad_from_url_is_refused_without_its_password(db_url: str) -> None:
    for bad in ("postgresql://app:s3cr%zzet@db.internal/x", "host=db password='s3cret user=app"):
        result = cli(db_url, "import", "pg-cron", "--from", bad)
        assert result.exit_code == 2, result.output
        assert "s3cr" not in result.output and "Traceback" not in result.output
        assert result.stderr.startswith('--from: "') and "***" in result.stderr
