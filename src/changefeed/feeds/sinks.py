"""The sink seam of ``CREATE CHANGEFEED .. INTO 'uri'``: a registry of sink kinds keyed by URI scheme.

A sink kind parses and validates its URI into a frozen :class:`SinkSpec` when the changefeed is
created (so a bad URI creates nothing) and names the topic each target table delivers to. The
pipeline delivers a job's records through the sink kind its spec names.

``topics://[?topic_prefix=P]`` is the embedded topic log of the database directory. The other
schemes CockroachDB knows are recognised here and refused with a clear error until their sink is
registered (``kafka``, ``webhook-https``, ``nodelocal`` and the other cloud-storage schemes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from changefeed.exceptions import InvalidOption, UnsupportedFeature


@dataclass(frozen=True, slots=True)
class SinkSpec:
    """A validated sink URI."""

    scheme: str
    uri: str  # as written in the statement
    topic_prefix: str = ""
    params: Mapping[str, str] = field(default_factory=dict)

    def topic_for(self, table: str, family: str | None = None) -> str:
        """The topic a target delivers to: ``prefix + table`` (``table.family`` for a family)."""
        return self.topic_prefix + table + (f".{family}" if family else "")

    @property
    def redacted(self) -> str:
        """The URI with secrets replaced, as ``SHOW CHANGEFEED JOBS`` shows ``sink_uri``."""
        return redact_uri(self.uri)


#: scheme -> parser of (uri, query parameters) into a SinkSpec.
SinkParser = Callable[[str, dict[str, str]], SinkSpec]
REGISTRY: dict[str, SinkParser] = {}

#: Schemes CockroachDB accepts whose sinks are not registered in this build (yet).
KNOWN_SCHEMES = (
    "kafka",
    "webhook-https",
    "webhook-http",
    "nodelocal",
    "s3",
    "gs",
    "azure",
    "azure-blob",
    "azure-storage",
    "http",
    "https",
    "file-http",
    "file-https",
    "userfile",
    "gcpubsub",
    "external",
    "null",
)

#: Query parameters whose values ``sink_uri`` hides.
SECRET_PARAMS = ("sasl_password", "client_key", "shared_access_key", "AWS_SECRET_ACCESS_KEY", "CREDENTIALS")


def register_sink(scheme: str) -> Callable[[SinkParser], SinkParser]:
    def deco(parser: SinkParser) -> SinkParser:
        REGISTRY[scheme] = parser
        return parser

    return deco


def parse_sink_uri(uri: str) -> SinkSpec:
    """Validate a sink URI (CockroachDB's errors for a missing/unknown scheme and parameters)."""
    parts = urlsplit(uri)
    if not parts.scheme or "://" not in uri:
        raise InvalidOption("no scheme found for sink URL")
    scheme = parts.scheme.lower()
    parser = REGISTRY.get(scheme)
    if parser is None:
        if scheme in KNOWN_SCHEMES:
            raise UnsupportedFeature(
                f"sink scheme {scheme} not available yet: this build delivers CREATE CHANGEFEED .. INTO "
                f"only to {', '.join(repr(s + '://') for s in sorted(REGISTRY))}"
            )
        raise InvalidOption(f"unsupported sink: {scheme}")
    raw = parse_qs(parts.query, keep_blank_values=True)
    params = {k: v[-1] for k, v in raw.items()}
    return parser(uri, params)


def redact_uri(uri: str) -> str:
    parts = urlsplit(uri)
    raw = parse_qs(parts.query, keep_blank_values=True)
    if not parts.password and not any(k in SECRET_PARAMS for k in raw):
        return uri
    query = "&".join(
        f"{k}=redacted" if k in SECRET_PARAMS else f"{k}={v}" for k, vs in raw.items() for v in vs
    )
    netloc = parts.netloc
    if parts.password:
        netloc = netloc.replace(f":{parts.password}@", ":redacted@")
    return parts._replace(netloc=netloc, query=query).geturl()


def _unknown(kind: str, params: Mapping[str, str], allowed: tuple[str, ...]) -> None:
    extra = sorted(set(params) - set(allowed))
    if extra:
        raise InvalidOption(f"unknown {kind} sink query parameters: [{', '.join(extra)}]")


# ------------------------------------------------------------------------------------- topics
TOPICS_PARAMS = ("topic_prefix",)


@register_sink("topics")
def _topics(uri: str, params: dict[str, str]) -> SinkSpec:
    parts = urlsplit(uri)
    if parts.netloc or parts.path not in ("", "/"):
        raise InvalidOption(
            f"the topics sink takes no host or path ({uri!r}): write 'topics://' or 'topics://?topic_prefix=P'"
        )
    _unknown("topics", params, TOPICS_PARAMS)
    return SinkSpec("topics", uri, params.get("topic_prefix", ""), params)
