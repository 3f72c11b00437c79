"""Setting values that are secrets, replaced unless ``--show-literals``: ``metrics.settings`` lists every
variable and config line a capture holds (``report._settings``), and config files carry passwords.

A value is replaced whole when its name ends in a secret word (``password``, ``replication_password``,
``secret``, ``token``, ``api_key``, ``auth_string``...; not ``password_encryption``, not ``ssl_key``, a
path); inside any other value, ``password=...``-style pairs of a connection string and the password of a
URL are replaced:

>>> secret_free("primary_conninfo", "host=10.0.0.2 user=rep password=s3cret application_name=r1")
'host=10.0.0.2 user=rep password=[redacted] application_name=r1'
>>> secret_free("password", "hunter2"), secret_free("password_encryption", "scram-sha-256"), secret_free("ssl_key", "/etc/k.pem")
('[redacted]', 'scram-sha-256', '/etc/k.pem')
>>> secret_free("dsn", "mysql://app:s3cret@db:3306/shop")
'mysql://app:[redacted]@db:3306/shop'
"""

from __future__ import annotations

from dbdiag.patterns import lazy_compile

REDACTED = "[redacted]"
SECRET_NAME = lazy_compile(
    r"(?i)(?:^|[._-])(?:password|passwd|pass|pwd|secret|token|credentials?|auth[_-]?string|api[_-]?key|access[_-]?key"
    r"|secret[_-]?key|private[_-]?key|key[_-]?password)$"
)
SECRET_PAIR = lazy_compile(r"(?i)\b(password|passwd|pwd|secret|token)(\s*=\s*)('[^']*'|\"[^\"]*\"|[^\s;,&]+)")
URL_PASSWORD = lazy_compile(r"(\b[a-z][\w+.-]*://[^:/@\s]+:)([^@\s/]+)(@)")


def secret_free(name: str | None, value: str | None) -> str | None:
    """``value`` with what a secret in it is replaced by REDACTED (see the module docstring)."""
    if value is None:
        return None
    if name and SECRET_NAME.search(name.strip()):
        return REDACTED if value.strip() else value
    value = SECRET_PAIR.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", value)
    return URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", value)
