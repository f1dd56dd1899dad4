"""The broker as Slurm's power-saving programs (contract, "Slurm integration (v2)").

``capacity-broker-slurm-resume`` (slurm.conf ``ResumeProgram``) launches each job's nodes
through ``reserve`` with ``provision: true``, all or nothing, and tells Slurm their addresses;
``-suspend`` (``SuspendProgram``) and ``-resume-fail`` (``ResumeFailProgram``) give the
instances back. ``capacity-broker slurm check`` validates the configuration against AWS.
Operators' walkthrough: docs/slurm.md.

Modules: ``config`` (the YAML), ``hostlist`` (Slurm's node expressions), ``plan`` (the rules:
what launches together, request ids, node ↔ instance), ``scontrol`` (Slurm), ``runtime``
(broker, EC2, scontrol for one run), ``launch`` (resume), ``giveback`` (suspend,
resume-fail), ``programs`` (the console scripts), ``check`` (the CLI command).
"""
