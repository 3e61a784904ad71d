# The controllers: plain instances (not an autoscaling group), because every
# member is configured with all of their addresses. They are spread over the
# private subnets, one per zone first. All of them run the same software and
# configuration: they compete for the leader lease in the state table
# (dynamodb.tf), the leader runs the balancing rounds, and the others stand
# by and take over when its lease lapses (docs/controller-ha.md).
resource "aws_instance" "controller" {
  count = var.controller_count

  ami                    = local.ami_id
  instance_type          = var.controller_instance_type
  subnet_id              = element(local.private_subnet_ids, count.index)
  vpc_security_group_ids = [aws_security_group.controller.id]
  iam_instance_profile   = aws_iam_instance_profile.node["controller"].name

  # cloud-init runs user_data only on first boot: a changed script needs a
  # new instance to take effect.
  user_data                   = local.controller_user_data
  user_data_replace_on_change = true

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  root_block_device {
    volume_type = "gp3"
    volume_size = var.root_volume_size_gb
    encrypted   = true
  }

  tags = { Name = "${var.name}-controller-${count.index}", Component = "controller" }

  # The first boot reads the cluster token and opens the state table.
  depends_on = [aws_iam_role_policy.controller_state, aws_iam_role_policy.cluster_token]

  lifecycle {
    # A newer Ubuntu image alone is no reason to replace a controller.
    ignore_changes = [ami]
    # Replacements boot (and join the election as standbys) before the old
    # controllers go, so the state table always has a live leader or a
    # standby ready to resume from it.
    create_before_destroy = true
  }
}
