{{/*
The alert rules: the groups of the PrometheusRule (prometheusrule.yaml). The tests render them
with `--set monitoring.rules.enabled=true` and run `promtool check rules` and `promtool test
rules` (deploy/helm/mds/tests/rules-test.yaml) on them. Each alert has a runbook section in
docs/operations.md. A series two controller replicas could both export is reduced with max or
min by its scaler's labels, so a leader change never makes a many-to-many match.
*/}}
{{- define "mds.ruleGroups" -}}
{{- $r := .Values.monitoring.rules -}}
- name: mds.scalers
  rules:
    - alert: MdsScalerFlapping
      expr: |
        sum by (namespace, scaler) (increase(mds_scaler_reversals_total[{{ $r.flapping.window }}])) > {{ $r.flapping.reversals }}
      for: 1m
      labels:
        severity: warning
      annotations:
        summary: {{`Scaler {{ $labels.namespace }}/{{ $labels.scaler }} keeps reversing its counts`}}
        description: More than {{ $r.flapping.reversals }} commits turned a role's direction within {{ $r.flapping.window }}; status.decisions shows them.
        runbook: docs/operations.md#mdsscalerflapping
    - alert: MdsSignalsLost
      expr: |
        max by (namespace, scaler, role) (time() - mds_role_signals_lost_since_timestamp_seconds)
          > on (namespace, scaler) group_left ()
        ({{ $r.signalsLost.intervals }} * max by (namespace, scaler) (mds_scaler_sampling_interval_seconds))
      labels:
        severity: warning
      annotations:
        summary: {{`Role {{ $labels.role }} of {{ $labels.namespace }}/{{ $labels.scaler }} has no usable engine signals`}}
        description: Its signals have been Missing or Stale for more than {{ $r.signalsLost.intervals }} sampling intervals; scale-down is held and growth cannot be sized on demand.
        runbook: docs/operations.md#mdssignalslost
    - alert: MdsPassesStalled
      expr: |
        min by (namespace, scaler) (time() - mds_scaler_last_pass_timestamp_seconds)
          > {{ $r.passesStalled.intervals }} * max by (namespace, scaler) (mds_scaler_sampling_interval_seconds)
      labels:
        severity: {{ $r.criticalSeverity }}
      annotations:
        summary: {{`Scaler {{ $labels.namespace }}/{{ $labels.scaler }} has stopped planning`}}
        description: No pass reached the planner for more than {{ $r.passesStalled.intervals }} sampling intervals.
        runbook: docs/operations.md#mdspassesstalled
    - alert: MdsScalerBlocked
      expr: |
        max by (namespace, scaler) (mds_scaler_blocked) == 1
      for: {{ $r.blocked.for }}
      labels:
        severity: warning
      annotations:
        summary: {{`Scaler {{ $labels.namespace }}/{{ $labels.scaler }} has been Blocked for`}} {{ $r.blocked.for }}
        description: Its Blocked condition is True; the condition's reason and message say what holds it and what releases it.
        runbook: docs/operations.md#mdsscalerblocked
    - alert: MdsGrowthRolledBack
      expr: |
        sum by (namespace, scaler) (increase(mds_scaler_decisions_total{kind="rollback"}[{{ $r.rollback.window }}])) > 0
      labels:
        severity: warning
      annotations:
        summary: {{`Growth of {{ $labels.namespace }}/{{ $labels.scaler }} was not admitted and was rolled back`}}
        description: Replicas it added were not admitted within pendingTimeoutSeconds, so it restored the counts before them.
        runbook: docs/operations.md#mdsgrowthrolledback
    - alert: MdsGrowthRolledBackRepeatedly
      expr: |
        sum by (namespace, scaler) (increase(mds_scaler_decisions_total{kind="rollback"}[{{ $r.rollback.repeatedWindow }}])) >= {{ $r.rollback.repeated }}
      labels:
        severity: {{ $r.criticalSeverity }}
      annotations:
        summary: {{`Growth of {{ $labels.namespace }}/{{ $labels.scaler }} keeps being rolled back`}}
        description: {{ $r.rollback.repeated }} or more rollbacks within {{ $r.rollback.repeatedWindow }}; the cluster does not admit the replicas this load needs.
        runbook: docs/operations.md#mdsgrowthrolledbackrepeatedly
    - alert: MdsTargetWritesFailing
      expr: |
        max by (namespace, scaler, kind, reason) (mds_scaler_write_failing) == 1
      for: {{ $r.writesFailing.for }}
      labels:
        severity: {{ $r.criticalSeverity }}
      annotations:
        summary: {{`The {{ $labels.kind }} write of {{ $labels.namespace }}/{{ $labels.scaler }} to its target keeps failing ({{ $labels.reason }})`}}
        description: It has not landed for {{ $r.writesFailing.for }}; the Active or Blocked condition's message says why and what releases it.
        runbook: docs/operations.md#mdstargetwritesfailing
    - alert: MdsScaleDownRefused
      expr: |
        max by (namespace, scaler, role) (mds_scaler_scale_down_refused) == 1
      for: 1m
      labels:
        severity: warning
      annotations:
        summary: {{`The target keeps refusing to retire replicas of {{ $labels.role }} in {{ $labels.namespace }}/{{ $labels.scaler }}`}}
        description: Two retirements in a row were aborted; the role's scale-down waits (status.scaleDownRefusals).
        runbook: docs/operations.md#mdsscaledownrefused
    - alert: MdsAtCeiling
      expr: |
        max by (namespace, scaler, role) (mds_role_current_replicas)
          >= max by (namespace, scaler, role) (mds_role_max_replicas)
        and
        max by (namespace, scaler, role) (mds_role_demand)
          > max by (namespace, scaler, role) (mds_role_capacity)
      for: {{ $r.ceiling.for }}
      labels:
        severity: warning
      annotations:
        summary: {{`Role {{ $labels.role }} of {{ $labels.namespace }}/{{ $labels.scaler }} is at maxReplicas with demand above its capacity`}}
        description: Demand has exceeded what its ready replicas serve at target for {{ $r.ceiling.for }}, and the role may not grow.
        runbook: docs/operations.md#mdsatceiling
    - alert: MdsQuotaExhausted
      expr: |
        max by (namespace, scaler) (mds_scaler_blocked{reason="ResourceExhausted"}) == 1
        and
        max by (namespace, scaler) (
          max by (namespace, scaler, role) (mds_role_demand)
            - max by (namespace, scaler, role) (mds_role_capacity)
        ) > 0
      for: {{ $r.ceiling.for }}
      labels:
        severity: warning
      annotations:
        summary: {{`Scaler {{ $labels.namespace }}/{{ $labels.scaler }} needs replicas the cluster does not admit`}}
        description: Its growth was rolled back (ResourceExhausted) and demand has stayed above capacity for {{ $r.ceiling.for }}.
        runbook: docs/operations.md#mdsquotaexhausted
- name: mds.operator
  rules:
    - alert: MdsNoLeader
      expr: |
        (max(mds_leader) or vector(0)) < 1
      for: {{ $r.noLeader.for }}
      labels:
        severity: {{ $r.criticalSeverity }}
      annotations:
        summary: No mds controller holds the lease
        description: No scaler is planning; the controller is down, not scraped, or cannot renew its Lease.
        runbook: docs/operations.md#mdsnoleader
    - alert: MdsObjectUndecodable
      expr: |
        max by (kind, namespace, name) (mds_undecodable_objects) == 1
      for: {{ $r.undecodable.for }}
      labels:
        severity: warning
      annotations:
        summary: {{`Object {{ $labels.kind }} {{ $labels.namespace }}/{{ $labels.name }} does not decode into mds's model`}}
        description: It is left out of the controller's caches; a target's scaler is Blocked (TargetUnreadable) and a scaler does not plan until a version of it decodes.
        runbook: docs/operations.md#mdsobjectundecodable
    - alert: MdsFenceRefusedWrite
      expr: |
        max by (namespace, target, rule) (mds_webhook_fence_last_refusal_timestamp_seconds)
          > time() - {{ $r.fenceRefusals.windowSeconds }}
      labels:
        severity: warning
      annotations:
        summary: {{`The binding fence refused a write of ModelDeployment {{ $labels.namespace }}/{{ $labels.target }} ({{ $labels.rule }})`}}
        description: A write of counts or scaler annotations its scaler owns was refused within the last {{ $r.fenceRefusals.windowSeconds }} s.
        runbook: docs/operations.md#mdsfencerefusedwrite
{{- end }}
