"""The elastic-membership protocol the examples use now lives in the ferry package
(``ferry.elastic``, the engine of ``ferry.diloco``); this name stays for the examples' imports."""

from ferry.elastic import BOUNDARY, REDUCE, RETRYABLE, ElasticGroup, PendingReduce

__all__ = ["BOUNDARY", "REDUCE", "RETRYABLE", "ElasticGroup", "PendingReduce"]
