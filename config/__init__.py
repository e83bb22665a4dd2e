"""Settings: one frozen object read from the environment, and what every process
needs at start. Imports nothing of busbar's.

Modules (docs/layout.md is the whole map; spec/test_map.py keeps both true):

    devstate.py         what a running `busbar dev` tells the commands beside it
    errors.py           the configuration's own error
    gunicorn.py         gunicorn's options, from Settings
    logging.py          one line per event, text or JSON
    main.py             `busbar config`
    origins.py          where each value `busbar config` shows came from
    parsers.py          environment values parsed, or why not
    redact.py           secrets out of what busbar shows
    settings.py         the one frozen settings object
    shown.py            a value as `busbar config` shows it, secrets masked
    startup.py          how every busbar process starts
"""
