"""The catalog's pages (docs/gateway.md, "The catalog page"): the published images, one alias
with everything its records hold, and the lifecycles in flight. A front end with no rule of its
own: what a reader may see is the use cases' (``gateway.site.Reads``); ``views`` turns
what they answer into rows, ``render`` into HTML from the templates and assets shipped here, and
``export`` writes the same pages as files (``slurm-image catalog --html DIR``). The gateway
serves them (``gateway.page_routes``).
"""
