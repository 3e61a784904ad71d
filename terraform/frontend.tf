# Front ends: a member group (modules/member) in the private subnets behind
# the public load balancer. Its size is frontend_count; a changed boot script
# rolls the group through an instance refresh.
module "frontend" {
  source = "./modules/member"

  name                 = "${var.name}-frontend"
  component            = "frontend"
  description          = "Chopper front end"
  ami_id               = local.ami_id
  root_device_name     = local.root_device_name
  instance_type        = var.frontend_instance_type
  instance_count       = var.frontend_count
  security_group_ids   = [aws_security_group.frontend.id]
  instance_profile_arn = aws_iam_instance_profile.node["frontend"].arn
  user_data            = local.frontend_user_data
  subnet_ids           = local.private_subnet_ids
  root_volume_size_gb  = var.root_volume_size_gb
  tags                 = local.tags

  # The load balancer's /healthz verdict replaces instances that boot but
  # never start routing.
  target_group_arns         = [aws_lb_target_group.frontend.arn]
  health_check_type         = "ELB"
  boot_grace_period_seconds = var.boot_grace_period_seconds

  # The first front ends must find a controller up to register, and read
  # the cluster token at boot.
  depends_on = [aws_instance.controller, aws_iam_role_policy.cluster_token]
}

# These were root resources before the member module: moving them keeps an
# existing deployment's group instead of replacing it.
moved {
  from = aws_launch_template.frontend
  to   = module.frontend.aws_launch_template.this
}

moved {
  from = aws_autoscaling_group.frontend
  to   = module.frontend.aws_autoscaling_group.this
}
