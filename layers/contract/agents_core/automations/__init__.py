"""Automations (`client.beta.agents.automations`): a cron expression in a time zone, or one `run_at`, that
starts a new Session or wakes an existing one, scheduled on EventBridge Scheduler.

- manage: create, read, list, update, delete, pause, resume (and the target, sealed)
- schedules: one EventBridge Scheduler schedule per automation
- invocations: each occurrence or manual run, delivered once per occurrence
- views: stored items -> SDK resources (confidential target parts never shown)
"""
