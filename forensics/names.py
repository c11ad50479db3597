"""Key names as words: how a team's own names (`sendgrid_message_id`, `providerMessageId`, `email.to.address`,
`context.recipient_email`, `stepIndex`, `@timestamp`) are compared with the vocabulary's.

    >>> name_words("providerMessageId")
    ('provider', 'message', 'id')
    >>> name_words("context.recipient_email")
    ('context', 'recipient', 'email')
    >>> name_words("HTTPStatus")
    ('http', 'status')
"""

from __future__ import annotations

import re

# An upper-case run before a capitalised word (HTTPStatus), a capitalised or lower-case word, or digits.
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def name_words(key: str) -> tuple[str, ...]:
    """The lower-case words of a key: split at `.`, `_`, `-`, spaces and other punctuation, and at camelCase
    humps."""
    return tuple(word.lower() for word in _WORD.findall(key))
