# App servers: a member group (modules/member) in the private subnets running
# apps/kv-cache (with its own Redis) or apps/compute, chosen by var.app.
# They are reached only by the front ends (data) and the controller
# (control), never through the load balancer.
module "appserver" {
  source = "./modules/member"

  name                      = "${var.name}-appserver"
  component                 = "appserver"
  description               = "Chopper app server (${var.app})"
  ami_id                    = local.ami_id
  root_device_name          = local.root_device_name
  instance_type             = var.appserver_instance_type
  instance_count            = var.appserver_count
  security_group_ids        = [aws_security_group.appserver.id]
  instance_profile_arn      = aws_iam_instance_profile.node["appserver"].arn
  user_data                 = local.appserver_user_data
  subnet_ids                = local.private_subnet_ids
  root_volume_size_gb       = var.root_volume_size_gb
  boot_grace_period_seconds = var.boot_grace_period_seconds
  tags                      = local.tags
  instance_tags             = { App = var.app }

  # kv-cache app servers need the table policy before their first request,
  # and every app server reads the cluster token at boot.
  depends_on = [aws_instance.controller, aws_iam_role_policy.appserver_dynamodb, aws_iam_role_policy.cluster_token]
}

moved {
  from = aws_launch_template.appserver
  to   = module.appserver.aws_launch_template.this
}

moved {
  from = aws_autoscaling_group.appserver
  to   = module.appserver.aws_autoscaling_group.this
}
