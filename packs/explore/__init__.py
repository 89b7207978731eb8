"""`kpack explore`: a read-only local web page over open packs (the query side only).

    app.py          the Starlette app: routes, security headers, error pages, following
                    each pack's `current`
    access.py       who may read it: the Host names it answers to, its token off loopback
    web.py          the packs served (Explorer: follows `current`), the template
                    environment, shared helpers
    views_pack.py   /  /builds  /diff  /eval
    views_ask.py    /ask
    views_graph.py  /section/<id>  /entity  /entity/graph  /entity/mentions
    render.py       pack text as safe HTML (markdown-it-py, then nh3)
    cli.py          open the packs, bind, print the URL, run uvicorn
    templates/      Jinja2, autoescaped; static/ the stylesheet, explore.js and the
                    vendored htmx and cytoscape.js (static/vendor/VENDORED.md)

Nothing here is imported by `packs/__init__`: `import packs` stays free of Starlette.
Needs `pip install 'knowledge-packs[explore]'` (cli.check_extras says so).
"""
