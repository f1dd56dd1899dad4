"""The broker's rules as plain functions: no AWS SDK, no I/O, every "now" passed in.

Handlers and adapters gather facts (tags, states, stack statuses, error codes) and ask this
package what they mean; keeping the rules here makes them testable case by case and keeps the
contract's tables in one place each.
"""
