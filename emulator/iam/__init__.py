"""IAM in the emulator: the broker functions' roles as ``infra/`` deploys them, and IAM's
verdict on every call made with one (``Emulator.enforce_roles``).

- ``roles.json`` + ``catalogue``: the roles synthesized from the CDK app, filled in for one
  broker (cluster id, regions, account, state table);
- ``policy``: IAM's policy evaluation (moto's ``IAMPolicy`` and ``IAMPolicyStatement``
  extended: wildcards, ``Not*`` elements, condition operators, explicit deny);
- ``context``: what each call asks of IAM (the resources it uses, the condition keys);
- ``enforcement``: the roles in moto's IAM and STS, the verdict, the services' refusals.
"""
