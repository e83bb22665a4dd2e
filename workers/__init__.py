"""`busbar worker`: the delivery engine (app/delivery) in a thread of its own, the
maintenance thread, the scheduler and tickers, heartbeats.

Modules (docs/layout.md is the whole map; spec/test_map.py keeps both true):

    __main__.py         `python -m workers`
    heartbeat.py        heartbeats, stamped with Redis's clock
    main.py             `busbar worker`
    process.py          the process: its thread group, stopped cleanly
    runner.py           the maintenance thread's loop (queue aux)
    scheduler.py        due scheduled jobs to instant, and the tickers
"""
