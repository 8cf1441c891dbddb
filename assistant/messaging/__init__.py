"""The messaging webhook: verification and signatures, inbound parsing and dedupe
(:mod:`~assistant.messaging.webhook`), outbound Graph-style messages (:mod:`~assistant.messaging.sender`),
and processing through chat in the background (:mod:`~assistant.messaging.service`)."""
